// Guest output → run events, without a scheduler: line assembly across chunk boundaries,
// the line cap, truncated last lines, every frame kind and every way a run can end. (The
// line splitter on its own: tests/unit/helpers/line_assembler_test.cpp.)

#include "actors/frame_translator.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

using ek = run_event::kind;

exec_stream_line out(std::string s) {
  return {exec_stream_line::kind::stdout_chunk, std::move(s), 0};
}
exec_stream_line err(std::string s) {
  return {exec_stream_line::kind::stderr_chunk, std::move(s), 0};
}

execution_report exited(int32_t code, std::optional<ec> outcome = std::nullopt) {
  execution_report r;
  r.result.exit_code = code;
  r.outcome = outcome;
  return r;
}

std::vector<run_event> feed(frame_translator& t,
                            std::initializer_list<exec_stream_line> lines) {
  std::vector<run_event> evs;
  for (auto& l : lines)
    t.on_line(l, evs);
  return evs;
}

const std::string done_line = R"({"t":"done"})"
                              "\n";

const std::string outputs_frame =
    R"({"t":"outputs","run_outputs":[{"inputs":{"input_value":"hi"},"outputs":[null]}]})";

TEST(frame_translator, maps_each_frame_to_its_event) {
  frame_translator t;
  auto evs =
      feed(t, {out(R"({"t":"note","runner":"guestflow"})"
                   "\n"),
               out(R"({"t":"vertex_start","id":"A-1","name":"Chat Input"})"
                   "\n"
                   R"({"t":"step","event":{"type":"vertex","id":"A-1","name":"Chat Input",)"),
               out(R"("valid":true,"duration_ms":12.4,"outputs":{"message":"hi"},"logs":"l"}})"
                   "\nuser print\n"),
               err("warning: x\n"),
               {exec_stream_line::kind::heartbeat, "", 0},
               out(R"({"t":"step","event":{"type":"vertex","id":"B-2","name":"Py",)"
                   R"("valid":false,"outputs":{"error":"NameError: x"},"logs":"trace"}})"
                   "\n"),
               out(outputs_frame + "\n" + R"({"t":"done"})" + "\n")});
  ASSERT_EQ(evs.size(), 4u);
  EXPECT_EQ(evs[0].type, ek::vertex_started);
  EXPECT_EQ(evs[0].id, "A-1");
  EXPECT_EQ(evs[0].name, "Chat Input");
  EXPECT_EQ(evs[1].type, ek::vertex_built);
  EXPECT_TRUE(evs[1].valid);
  EXPECT_EQ(evs[1].duration_ms, 12u);
  EXPECT_EQ(evs[1].outputs.text, R"({"message":"hi"})");
  EXPECT_EQ(evs[1].logs, "l");
  EXPECT_EQ(evs[2].type, ek::stdout_line);
  EXPECT_EQ(evs[2].line, "user print");
  EXPECT_EQ(evs[3].type, ek::vertex_failed);
  EXPECT_EQ(evs[3].id, "B-2");
  EXPECT_EQ(evs[3].message, "NameError: x");
  EXPECT_TRUE(t.done_seen());
  EXPECT_FALSE(t.violation());
  // A failed vertex makes the run fail as Langflow's does, whatever the runner did next.
  auto end = t.finish(exited(0));
  ASSERT_EQ(end.type, ek::error);
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_EQ(end.message, "Error building Component Py: \n\nNameError: x");
  EXPECT_EQ(end.failed, std::vector<std::string>{"B-2"});
}

TEST(frame_translator, a_run_with_every_vertex_built_completes_with_its_outputs) {
  frame_translator t;
  auto evs = feed(t, {out(R"({"t":"step","event":{"type":"vertex","id":"A-1","name":"In",)"
                          R"("valid":true,"outputs":{}}})"
                          "\n" +
                          outputs_frame + "\n" + done_line)});
  ASSERT_EQ(evs.size(), 1u);
  auto end = t.finish(exited(0));
  ASSERT_EQ(end.type, ek::complete);
  ASSERT_EQ(end.run_outputs_list.size(), 1u);
  EXPECT_EQ(end.run_outputs_list[0].inputs.text, R"({"input_value":"hi"})");
  EXPECT_TRUE(end.failed.empty());
  EXPECT_TRUE(end.context().empty()) << "no state frame: no context";
}

TEST(frame_translator, tokens_messages_results_and_state_reach_the_events) {
  frame_translator t;
  auto evs = feed(
      t,
      {out(R"({"t":"vertex_start","id":"LLM-1","name":"Model"})"
           "\n"
           R"({"t":"token","id":"LLM-1","data":{"chunk":"Hel","id":"m-1"}})"
           "\n"
           R"({"t":"token","id":"LLM-1","data":{"chunk":"lo","id":"m-1"}})"
           "\n"
           R"({"t":"step","event":{"type":"vertex","id":"LLM-1","name":"Model","valid":true,)"
           R"("outputs":{},"result":{"results":{"text_output":{"text":"Hello"}}},)"
           R"("types":{"text_output":"Message"}}})"
           "\n"
           R"({"t":"message","id":"Out-2","data":{"text":"Hello","sender":"Machine"}})"
           "\n"
           R"({"t":"state","context":{"seen":[1,2]}})"
           "\n" +
           outputs_frame + "\n" + done_line)});
  ASSERT_EQ(evs.size(), 5u);
  EXPECT_EQ(evs[1].type, ek::token);
  EXPECT_EQ(evs[1].id, "LLM-1");
  EXPECT_EQ(evs[1].data().text, R"({"chunk":"Hel","id":"m-1"})");
  EXPECT_EQ(evs[2].data().text, R"({"chunk":"lo","id":"m-1"})");
  EXPECT_EQ(evs[3].type, ek::vertex_built);
  EXPECT_EQ(evs[3].result().text, R"({"results":{"text_output":{"text":"Hello"}}})");
  EXPECT_EQ(evs[3].types().text, R"({"text_output":"Message"})");
  EXPECT_EQ(evs[4].type, ek::message);
  EXPECT_EQ(evs[4].id, "Out-2");
  EXPECT_EQ(evs[4].data().text, R"({"text":"Hello","sender":"Machine"})");
  auto end = t.finish(exited(0));
  ASSERT_EQ(end.type, ek::complete);
  EXPECT_EQ(end.context().text, R"({"seen":[1,2]})");
}

TEST(frame_translator, malformed_new_frames_are_violations_naming_the_field) {
  for (auto& [line, mentions] : std::vector<std::pair<std::string, std::string>>{
           {R"({"t":"token","id":"A","data":{"id":"m"}})", "data.chunk: required"},
           {R"({"t":"token","id":"A","data":"text"})", "data: expected object"},
           {R"({"t":"token","data":{"chunk":"x"}})", "id: required"},
           {R"({"t":"token","id":"A","data":{"chunk":"x","id":5}})",
            "data.id: expected string"},
           {R"({"t":"token","id":")" + std::string(1025, 'i') + R"(","data":{"chunk":"x"}})",
            "id: 1025 bytes exceeds"},
           {R"({"t":"message","id":"A","data":[]})", "data: expected object"},
           {R"({"t":"state","context":"x"})", "context: expected object"},
           {R"({"t":"step","event":{"type":"vertex","id":"A","valid":true,"result":[1]}})",
            "event.result: expected object"},
           {R"({"t":"step","event":{"type":"vertex","id":"A","valid":true,"types":{"o":1}}})",
            "event.types.o: expected string"},
       }) {
    frame_translator t;
    auto evs = feed(t, {out(line + "\n" + done_line)});
    EXPECT_TRUE(evs.empty()) << line;
    ASSERT_TRUE(t.violation()) << line;
    EXPECT_NE(t.violation()->message.find(mentions), std::string::npos)
        << line << " → " << t.violation()->message;
    EXPECT_EQ(t.finish(exited(0)).type, ek::error);
  }
}

TEST(frame_translator, the_error_of_a_failed_vertex_is_langflows_text_for_the_first) {
  // lfx's Vertex._build_results: "Error building Component {display_name}: \n\n{exc}".
  frame_translator t;
  auto evs = feed(
      t, {out(R"({"t":"note","executor":"core"})"
              "\n"
              R"({"t":"step","event":{"type":"vertex","id":"A","name":"In","valid":true}})"
              "\n"
              R"({"t":"step","event":{"type":"vertex","id":"P-2","name":"Python Interpreter",)"
              R"("valid":false,"error":"ValueError: boom","outputs":{"error":"other"}}})"
              "\n"
              R"({"t":"step","event":{"type":"vertex","id":"Q-3","name":"Q","valid":false,)"
              R"("error":"second"}})"
              "\n"
              R"({"t":"fatal","error":"the runner's own words","traceback":""})"
              "\n")});
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[1].type, ek::vertex_failed);
  EXPECT_EQ(evs[1].message, "ValueError: boom") << "the step's error first";
  auto end = t.finish(exited(1));
  ASSERT_EQ(end.type, ek::error);
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_EQ(end.message, "Error building Component Python Interpreter: \n\nValueError: boom");
  EXPECT_EQ(end.failed, (std::vector<std::string>{"P-2", "Q-3"}));
  EXPECT_EQ(end.executor, "core");
  // lfx in the guest raised the text already: it is kept, not wrapped twice.
  frame_translator l;
  feed(l, {out(R"({"t":"step","event":{"type":"vertex","id":"X","name":"X","valid":false,)"
               R"("error":"Error building Component X: \n\nboom"}})"
               "\n" +
               done_line)});
  EXPECT_EQ(l.finish(exited(0)).message, "Error building Component X: \n\nboom");
  // The host's own verdicts still win: a timeout is a timeout.
  frame_translator late;
  feed(late, {out(R"({"t":"step","event":{"type":"vertex","id":"X","valid":false}})"
                  "\n")});
  EXPECT_EQ(late.finish(exited(-1, ec::timeout)).code, ec::timeout);
}

TEST(frame_translator, a_failed_vertex_without_an_error_member_reports_its_logs) {
  frame_translator t;
  auto evs = feed(t, {out(R"({"t":"step","event":{"type":"vertex","id":"P","name":"Prompt",)"
                          R"("valid":false,"outputs":{},"logs":"KeyError: 'x'"}})"
                          "\n"),
                      out(R"({"t":"step","event":{"type":"vertex","id":"Q","valid":false}})"
                          "\n")});
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].message, "KeyError: 'x'");
  EXPECT_EQ(evs[1].message, "vertex Q failed without a message");
}

TEST(frame_translator, after_done_exit_zero_completes_and_any_other_exit_fails) {
  for (int32_t code : {0, 3}) {
    frame_translator t;
    feed(t, {out(done_line)});
    auto end = t.finish(exited(code));
    if (code == 0) {
      EXPECT_EQ(end.type, ek::complete);
      EXPECT_TRUE(end.run_outputs_list.empty()); // no outputs frame: none
    } else {
      EXPECT_EQ(end.code, ec::guest_failed);
      EXPECT_NE(end.message.find("code 3 after its done frame"), std::string::npos);
    }
  }
}

TEST(frame_translator, missing_done_is_an_error_quoting_stderr) {
  frame_translator t;
  feed(t, {out("garbage\n"), err("Traceback: boom\n")});
  auto end = t.finish(exited(0));
  EXPECT_EQ(end.type, ek::error);
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_NE(end.message.find("without a done frame"), std::string::npos) << end.message;
  EXPECT_NE(end.message.find("Traceback: boom"), std::string::npos) << end.message;
}

TEST(frame_translator, a_truncated_last_line_is_an_error_even_after_other_frames) {
  frame_translator t;
  auto evs = feed(t, {out(R"({"t":"vertex_start","id":"A"})"
                          "\n"
                          R"({"t":"step","ev)")});
  EXPECT_EQ(evs.size(), 1u);
  auto end = t.finish(exited(137));
  EXPECT_EQ(end.type, ek::error);
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_NE(end.message.find("middle of a frame"), std::string::npos) << end.message;
}

TEST(frame_translator, an_oversize_line_is_a_violation_and_wins_over_any_later_outcome) {
  frame_translator_options o;
  o.max_line = 100;
  frame_translator t{o};
  auto evs = feed(t, {out("small\n"), out(std::string(60, 'x')), out(std::string(60, 'y')),
                      out("\n"
                          R"({"t":"done"})"
                          "\n")});
  EXPECT_EQ(evs.size(), 1u); // only "small"; nothing after the violation
  ASSERT_TRUE(t.violation());
  EXPECT_NE(t.violation()->message.find("longer than 100 bytes"), std::string::npos);
  EXPECT_FALSE(t.done_seen());
  auto end = t.finish(fail(ec::guest_failed, "run cancelled"));
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_NE(end.message.find("longer than 100 bytes"), std::string::npos);
}

TEST(frame_translator, a_malformed_frame_is_a_violation) {
  frame_translator t;
  auto evs = feed(t, {out(R"({"t":"vertex_start","id":7})"
                          "\n"
                          R"({"t":"done"})"
                          "\n")});
  EXPECT_TRUE(evs.empty());
  ASSERT_TRUE(t.violation());
  auto end = t.finish(exited(0));
  EXPECT_EQ(end.type, ek::error);
  EXPECT_NE(end.message.find("malformed frame: id"), std::string::npos) << end.message;
}

TEST(frame_translator, fatal_frame_is_the_error_message) {
  frame_translator t;
  feed(t, {out(R"({"t":"fatal","error":"invalid spec: graph.nodes","traceback":"tb"})"
               "\n")});
  auto end = t.finish(exited(1));
  EXPECT_EQ(end.code, ec::guest_failed);
  EXPECT_EQ(end.message, "invalid spec: graph.nodes");
}

TEST(frame_translator, a_fatal_frame_keeps_a_code_a_runner_may_give_and_no_other) {
  for (auto& [code, want] : std::vector<std::pair<std::string, ec>>{
           {"bad_request", ec::bad_request},
           {"unavailable", ec::unavailable},
           {"oom", ec::guest_failed}, // the host decides timeouts, OOM and cancellation
           {"cancelled", ec::guest_failed},
           {"no_such_code", ec::guest_failed},
       }) {
    frame_translator t;
    feed(t, {out(R"({"t":"fatal","error":"e","traceback":"","code":")" + code + "\"}\n")});
    auto end = t.finish(exited(1));
    EXPECT_EQ(end.code, want) << code;
    EXPECT_EQ(end.message, "e");
  }
}

TEST(frame_translator, terminal_events_say_which_executor_ran_and_which_vertices_failed) {
  frame_translator t;
  feed(
      t,
      {out(
          R"({"t":"note","runner":"guestflow","executor":"lfx","reason":"r"})"
          "\n"
          R"({"t":"note","executor":"core"})"
          "\n"
          R"({"t":"step","event":{"type":"vertex","id":"A","valid":false,"outputs":{"error":"x"}}})"
          "\n"
          R"({"t":"step","event":{"type":"vertex","id":"B","valid":true}})"
          "\n"
          R"({"t":"step","event":{"type":"vertex","id":"C","valid":false}})"
          "\n" +
          outputs_frame + "\n" + done_line)});
  auto end = t.finish(exited(0));
  ASSERT_EQ(end.type, ek::error);
  EXPECT_EQ(end.executor, "lfx") << "the first note that names one";
  EXPECT_EQ(end.failed, (std::vector<std::string>{"A", "C"}));
  EXPECT_EQ(end.message, "Error building Component A: \n\nx") << "no name: the id";
  auto failed = t.finish(fail(ec::cancelled, "run cancelled by the caller"));
  EXPECT_EQ(failed.code, ec::cancelled);
  EXPECT_EQ(failed.executor, "lfx");
  EXPECT_EQ(failed.failed.size(), 2u);
  frame_translator quiet; // a runner that never said
  EXPECT_EQ(quiet.finish(exited(1)).executor, "");
}

TEST(frame_translator, timeout_and_oom_outcomes_win_over_frames) {
  frame_translator_options o;
  o.timeout_seconds = 7;
  frame_translator t{o};
  feed(t, {out(R"({"t":"vertex_start","id":"A"})"
               "\n"
               R"({"t":"st)")});
  auto end = t.finish(exited(-1, ec::timeout));
  EXPECT_EQ(end.code, ec::timeout);
  EXPECT_NE(end.message.find("7 s limit"), std::string::npos) << end.message;
  frame_translator u;
  end = u.finish(exited(137, ec::oom));
  EXPECT_EQ(end.code, ec::oom);
}

TEST(frame_translator, execution_failure_keeps_its_code) {
  frame_translator t;
  auto end = t.finish(fail(ec::unavailable, "control plane down"));
  EXPECT_EQ(end.type, ek::error);
  EXPECT_EQ(end.code, ec::unavailable);
  EXPECT_EQ(end.message, "control plane down");
}

TEST(frame_translator, stderr_is_a_bounded_tail) {
  frame_translator_options o;
  o.stderr_tail = 16;
  o.stderr_excerpt = 8;
  frame_translator t{o};
  for (int i = 0; i < 1000; ++i)
    feed(t, {err("0123456789")});
  feed(t, {err("END-OF-ERR")});
  EXPECT_LE(t.stderr_held(), 32u);
  auto end = t.finish(exited(1));
  EXPECT_NE(end.message.find("; stderr (tail): D-OF-ERR"), std::string::npos) << end.message;
  EXPECT_LT(end.message.size(), 200u);
}

} // namespace
} // namespace guestflow
