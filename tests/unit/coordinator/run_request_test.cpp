// The bridge's run body codec and the CAF side of the new message types.

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/deep_to_string.hpp>
#include <gtest/gtest.h>
#include <sstream>

namespace guestflow {
namespace {

const std::string flow =
    R"({"data":{"nodes":[{"id":"ChatInput-1","data":{"type":"ChatInput"}},)"
    R"({"id":"ChatOutput-2","data":{"type":"ChatOutput"}}],)"
    R"("edges":[{"source":"ChatInput-1","target":"ChatOutput-2"}]}})";

TEST(run_request_codec, decodes_the_full_body) {
  auto r =
      decode<run_request>(R"({"flow":)" + flow +
                          R"(,"inputs":"hi",)"
                          R"("runtime_options":{"session_id":"s"},"outputs":["ChatOutput-2"],)"
                          R"("stream":true,"timeout_seconds":30,"extra":1})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.edges.size(), 1u);
  EXPECT_EQ(r->inputs.text, R"("hi")");
  EXPECT_EQ(r->runtime_options.text, R"({"session_id":"s"})");
  EXPECT_EQ(r->outputs, std::vector<std::string>{"ChatOutput-2"});
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->timeout_seconds, std::optional<uint32_t>{30});
  auto again = decode<run_request>(encode(*r));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *r);
}

TEST(run_request_codec, only_flow_is_required) {
  auto r = decode<run_request>(R"({"flow":)" + flow + "}");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->inputs.empty());
  EXPECT_TRUE(r->runtime_options.empty());
  EXPECT_TRUE(r->stream); // the bridge streams unless asked not to (bridge/API.md)
  EXPECT_FALSE(r->cancel_on_disconnect);
  EXPECT_FALSE(r->timeout_seconds);
}

TEST(run_request_codec, refusals_name_the_field) {
  struct bad_case {
    std::string body;
    const char* mentions;
  };
  for (
      auto& c : std::vector<bad_case>{
          {R"({})", "flow: required"},
          {R"({"flow":{"nodes":[]}})", "flow.edges: required"},
          {R"({"flow":{"nodes":[{"id":"a","data":{"type":"X"}}],"edges":[{"source":"a","target":"b"}]}})",
           "flow.edges[0].target: unknown node"},
          {R"({"flow":{"nodes":[{"id":"a","data":{"type":"X"}},{"id":"b","data":{"type":"X"}}],)"
           R"("edges":[{"source":"a","target":"b"},{"source":"b","target":"a"}]}})",
           "flow.edges: cycle: a -> b -> a"},
          {R"({"flow":)" + flow + R"(,"runtime_options":[]})",
           "runtime_options: expected object"},
          {R"({"flow":)" + flow + R"(,"outputs":"x"})", "outputs: expected array"},
          {R"({"flow":)" + flow + R"(,"timeout_seconds":0})",
           "timeout_seconds: 0 out of range"},
          {R"({"flow":)" + flow + R"(,"stream":"yes"})", "stream"},
          {R"({"flow":)", "document"},
      }) {
    auto r = decode<run_request>(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos)
        << c.body << " → " << r.error().message;
  }
}

const std::string state_fields =
    R"("session_id":"sess-1","user_id":"user-7","context":{"b":[1,2],"a":{"x":null}},)"
    R"("tweaks":{"ChatInput-1":{"input_value":"tweaked"}},)"
    R"("variables":{"OPENAI_API_KEY":"sk-live-123456","_x9":""},)"
    R"("history":[{"text":"hello","sender":"User"},{"text":"hi","sender":"Machine"}])";

TEST(run_request_codec, decodes_the_runtime_state) {
  auto r = decode<run_request>(R"({"flow":)" + flow + "," + state_fields + "}");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->session_id, std::optional<std::string>{"sess-1"});
  EXPECT_EQ(r->user_id, std::optional<std::string>{"user-7"});
  EXPECT_EQ(r->context.text, R"({"b":[1,2],"a":{"x":null}})"); // canonical, order kept
  EXPECT_EQ(r->tweaks.text, R"({"ChatInput-1":{"input_value":"tweaked"}})");
  EXPECT_EQ(r->variables.reveal(),
            (secret_vars::map_type{{"OPENAI_API_KEY", "sk-live-123456"}, {"_x9", ""}}));
  ASSERT_TRUE(r->history);
  ASSERT_EQ(r->history->size(), 2u);
  EXPECT_EQ((*r->history)[1].text, R"({"text":"hi","sender":"Machine"})");
}

TEST(run_request_codec, absent_state_stays_absent) {
  auto r = decode<run_request>(R"({"flow":)" + flow +
                               R"(,"session_id":null,"context":null,"history":null})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->session_id);
  EXPECT_FALSE(r->user_id);
  EXPECT_TRUE(r->context.empty());
  EXPECT_TRUE(r->tweaks.empty());
  EXPECT_TRUE(r->variables.empty());
  EXPECT_FALSE(r->history); // absent: serve may use its own store
  auto empty = decode<run_request>(R"({"flow":)" + flow + R"(,"history":[]})");
  ASSERT_TRUE(empty);
  ASSERT_TRUE(empty->history); // given and empty: the caller owns the memory
  EXPECT_TRUE(empty->history->empty());
  EXPECT_EQ(encode(*r).find("session_id"), std::string::npos);
}

TEST(run_request_codec, an_encoded_request_never_carries_a_secret) {
  auto r = decode<run_request>(R"({"flow":)" + flow + "," + state_fields + "}");
  ASSERT_TRUE(r) << r.error().message;
  auto bytes = encode(*r);
  EXPECT_EQ(bytes.find("sk-live-123456"), std::string::npos) << bytes;
  EXPECT_NE(bytes.find(R"("variables":{"OPENAI_API_KEY":"********","_x9":"********"})"),
            std::string::npos)
      << bytes;
  auto back = decode<run_request>(bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, redacted(*r));
  EXPECT_NE(*back, *r);
  EXPECT_EQ(encode(*back), bytes);
  // Every printed form: CAF's (logging, deep_to_string) and the stream operator.
  EXPECT_EQ(caf::deep_to_string(*r).find("sk-live"), std::string::npos)
      << caf::deep_to_string(*r);
  EXPECT_NE(caf::deep_to_string(*r).find("OPENAI_API_KEY"), std::string::npos);
  std::ostringstream os;
  os << r->variables;
  EXPECT_EQ(os.str(), R"({"OPENAI_API_KEY":"********","_x9":"********"})");
}

TEST(run_request_codec, state_refusals_name_the_field_not_the_secret) {
  struct bad_case {
    std::string fields;
    const char* mentions;
  };
  std::string long_id(run_request_caps::id_bytes + 1, 'x');
  std::string big_value(run_request_caps::variable_value_bytes + 1, 'q');
  std::string many = R"("variables":{)";
  for (size_t i = 0; i <= run_request_caps::variables; ++i)
    many += (i ? ",\"" : "\"") + std::string{"V"} + std::to_string(i) + R"(":"v")";
  many += "}";
  std::string long_history = R"("history":[)";
  for (size_t i = 0; i <= run_request_caps::history_messages; ++i)
    long_history += i ? ",{}" : "{}";
  long_history += "]";
  for (auto& c : std::vector<bad_case>{
           {R"("session_id":7)", "session_id: expected string"},
           {R"("session_id":")" + long_id + R"(")", "session_id: 1025 bytes exceeds"},
           {R"("user_id":"a\u0000b")", "user_id: must not contain NUL"},
           {R"("context":[1])", "context: expected object"},
           {R"("tweaks":"x")", "tweaks: expected object"},
           {R"("variables":["SECRETVALUE"])", "variables: expected object"},
           {R"("variables":{"1BAD":"SECRETVALUE"})", R"(variables: "1BAD" is not a variable)"},
           {R"("variables":{"A-B":"SECRETVALUE"})", R"("A-B" is not a variable name)"},
           {R"("variables":{"":"SECRETVALUE"})", R"("" is not a variable name)"},
           {R"("variables":{"KEY":5})", "variables.KEY: expected string, got number"},
           {R"("variables":{"KEY":"SECRET\u0000VALUE"})",
            "variables.KEY: must not contain NUL"},
           {R"("variables":{"KEY":")" + big_value + R"("})", "variables.KEY: value of 65537"},
           {many, "257 variables exceeds the limit of 256"},
           {R"("history":{})", "history: expected array"},
           {R"("history":[{},"SECRETVALUE"])", "history[1]: expected object"},
           {long_history, "history: 10001 messages exceeds"},
       }) {
    auto body = R"({"flow":)" + flow + "," + c.fields + "}";
    auto r = decode<run_request>(body);
    ASSERT_FALSE(r) << c.fields.substr(0, 200);
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos)
        << c.fields.substr(0, 200) << " → " << r.error().message;
    EXPECT_EQ(r.error().message.find("SECRET"), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find("qqqq"), std::string::npos) << r.error().message;
  }
}

TEST(run_request_codec, variable_names_are_environment_names) {
  for (auto good : {"A", "_", "OPENAI_API_KEY", "a1_b2", "_9"})
    EXPECT_TRUE(is_variable_name(good)) << good;
  for (auto bad : {"", "9A", "A B", "A-B", "A.B", "Ä", "A=B"})
    EXPECT_FALSE(is_variable_name(bad)) << bad;
  EXPECT_TRUE(is_variable_name(std::string(run_request_caps::variable_name_bytes, 'A')));
  EXPECT_FALSE(is_variable_name(std::string(run_request_caps::variable_name_bytes + 1, 'A')));
}

template<class T>
void round_trip(caf::actor_system& sys, const T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto msg = caf::make_message(x);
  ASSERT_FALSE(sink(msg));
  caf::message back;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(back));
  ASSERT_TRUE(back.match_elements<T>());
  EXPECT_TRUE(back.get_as<T>(0) == x);
}

TEST(run_request_codec, new_types_serialize_inside_caf_messages) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto r = decode<run_request>(R"({"flow":)" + flow + R"(,"inputs":"hi","timeout_seconds":5})");
  ASSERT_TRUE(r);
  round_trip(sys, *r);
  // Across a middleman the secrets must arrive: CAF's serializers see the values.
  auto full = decode<run_request>(R"({"flow":)" + flow + "," + state_fields + "}");
  ASSERT_TRUE(full) << full.error().message;
  round_trip(sys, *full);
  run_input in;
  in.input_value = "x";
  in.session = "s";
  in.components = {"a", "b"};
  round_trip(sys, in);
  round_trip(sys, coordinator_stats{1, 2, 3, 4, 5, 6});
}

} // namespace
} // namespace guestflow
