// Guest frames: every runner line classifies; only a known frame with bad fields fails.

#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

using namespace std::string_literals;

struct user_line {
  std::string name;
  std::string line;
};

class not_a_frame : public ::testing::TestWithParam<user_line> {};

TEST_P(not_a_frame, is_user_output_with_the_raw_line) {
  auto f = decode_frame(GetParam().line);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->type, guest_frame::kind::stdout_line);
  EXPECT_EQ(f->line, GetParam().line);
}

INSTANTIATE_TEST_SUITE_P(
    lines, not_a_frame,
    ::testing::Values(user_line{"PlainText", "hello world"}, user_line{"Empty", ""},
                      user_line{"JsonArray", R"([{"t":"done"}])"},
                      user_line{"JsonNumber", "42"}, user_line{"NoT", R"({"x":1})"},
                      user_line{"UnknownT", R"({"t":"progress","pct":5})"},
                      user_line{"NumericT", R"({"t":5})"}, user_line{"NullT", R"({"t":null})"},
                      user_line{"BrokenJson", R"({"t":"done")"},
                      user_line{"TrailingGarbage", R"({"t":"done"} and more)"},
                      user_line{"PythonRepr", "{'t': 'done'}"},
                      user_line{"DeepNesting", std::string(500, '[')},
                      user_line{"EmbeddedNul", "a\0b"s}),
    [](const ::testing::TestParamInfo<user_line>& info) { return info.param.name; });

TEST(frame, invalid_utf8_user_output_is_replaced_not_refused) {
  auto f = decode_frame("caf\xe9 latin-1");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, guest_frame::kind::stdout_line);
  EXPECT_EQ(f->line, "caf\xEF\xBF\xBD latin-1");
}

TEST(frame, known_frames_decode) {
  auto start = decode_frame(R"({"t":"vertex_start","id":"Prompt-2","name":"Prompt"})");
  ASSERT_TRUE(start);
  EXPECT_EQ(start->type, guest_frame::kind::vertex_start);
  EXPECT_EQ(start->id, "Prompt-2");
  EXPECT_EQ(start->name, "Prompt");

  auto step =
      decode_frame(R"({"t":"step","event":{"type":"vertex","id":"a","name":"A",)"
                   R"("valid":true,"duration_ms":12,"outputs":{"x": [1]},"logs":"l"}})");
  ASSERT_TRUE(step) << step.error().message;
  EXPECT_EQ(step->type, guest_frame::kind::step);
  EXPECT_TRUE(step->valid);
  EXPECT_EQ(step->duration_ms, 12u);
  EXPECT_EQ(step->vertex_outputs.text, R"({"x":[1]})");
  EXPECT_EQ(step->logs, "l");

  auto done = decode_frame("{\"t\":\"done\"}\r\n");
  ASSERT_TRUE(done);
  EXPECT_EQ(done->type, guest_frame::kind::done);

  auto fatal = decode_frame(R"({"t":"fatal","error":"boom","traceback":"tb"})");
  ASSERT_TRUE(fatal);
  EXPECT_EQ(fatal->type, guest_frame::kind::fatal);
  EXPECT_EQ(fatal->error, "boom");
  EXPECT_EQ(fatal->traceback, "tb");
}

TEST(frame, float_durations_are_rounded) {
  auto step =
      decode_frame(R"({"t":"step","event":{"type":"vertex","id":"a","duration_ms":12.6}})");
  ASSERT_TRUE(step) << step.error().message;
  EXPECT_EQ(step->duration_ms, 13u);
}

TEST(frame, note_keeps_the_canonical_frame) {
  auto note = decode_frame(R"({ "t" : "note", "lfx" : "0.1" })");
  ASSERT_TRUE(note);
  EXPECT_EQ(note->type, guest_frame::kind::note);
  EXPECT_EQ(note->line, R"({"t":"note","lfx":"0.1"})");
}

TEST(frame, unknown_step_kind_is_a_note_not_an_error) {
  auto f = decode_frame(R"({"t":"step","event":{"type":"message","text":"hi"}})");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->type, guest_frame::kind::note);
}

TEST(frame, outputs_frame_carries_run_outputs) {
  auto f = decode_frame(
      R"({"t":"outputs","run_outputs":[{"inputs":{"input_value":"hi"},"outputs":[null,)"
      R"({"results":{"m":1},"timedelta":0.5,"duration":"0.5s","component_display_name":"Out",)"
      R"("component_id":"o-1","used_frozen_result":false,"unknown":[1]}]}]})");
  ASSERT_TRUE(f) << f.error().message;
  ASSERT_EQ(f->run_outputs_list.size(), 1u);
  auto& ro = f->run_outputs_list[0];
  EXPECT_EQ(ro.inputs.text, R"({"input_value":"hi"})");
  ASSERT_EQ(ro.outputs.size(), 2u);
  EXPECT_FALSE(ro.outputs[0].has_value());
  ASSERT_TRUE(ro.outputs[1].has_value());
  EXPECT_EQ(ro.outputs[1]->results.text, R"({"m":1})");
  EXPECT_TRUE(ro.outputs[1]->artifacts.empty());
  EXPECT_EQ(ro.outputs[1]->timedelta, 0.5);
  EXPECT_EQ(ro.outputs[1]->duration, std::string{"0.5s"});
  EXPECT_EQ(ro.outputs[1]->component_id, "o-1");
}

TEST(frame, large_but_allowed_line_still_parses) {
  std::string big = R"({"t":"fatal","error":")" + std::string(1 << 20, 'x') + R"("})";
  auto f = decode_frame(big);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->type, guest_frame::kind::fatal);
  EXPECT_EQ(f->error.size(), size_t{1} << 20);
}

TEST(run_event, terminal_kinds) {
  using k = run_event::kind;
  for (auto kind : {k::vertex_started, k::vertex_built, k::vertex_failed, k::stdout_line,
                    k::token, k::message})
    EXPECT_FALSE(test::event_of(kind).terminal());
  EXPECT_TRUE(test::event_of(k::complete).terminal());
  EXPECT_TRUE(test::event_of(k::error).terminal());
}

} // namespace
} // namespace guestflow
