// Langflow's runtime state through `guestflow serve` into a real guest and back: the
// request's tweaks change the graph before anything builds, its context comes back on the
// `complete` event as the guest's graph left it, and its session reaches the guest's
// messages. (The CLI has no tweaks or context: these need the bridge's body.) A run that
// stops at a failed vertex is counted by /metrics as its error outcome, never `complete`.

#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/integration/runtime/flows.hpp"

#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::testing;

namespace {

class serve_state_test : public bridge_fixture {
protected:
  /// A streamed run of `flow` with the body's `extra` members, to its last event.
  std::vector<run_event> run_flow(const std::string& flow, const std::string& extra) {
    auto s = stream("POST", "/v1/runs", R"({"flow":)" + flow + "," + extra + "}");
    EXPECT_EQ(s->status(), 200u);
    return drain(*s);
  }
};

} // namespace

TEST_F(serve_state_test, tweaks_context_and_session_reach_the_guests_graph) {
  // Text Input (its own value) → Python Interpreter → Chat Output.
  auto flow = R"({"nodes":[)" +
              node("t", "TextInput", R"({"input_value":{"value":"original"}})") + "," +
              node("py", "PythonREPLComponent",
                   R"j({"global_imports":{"value":""},)j"
                   R"j("python_code":{"value":"print('got ' + input_value)"}})j") +
              "," + node("out", "ChatOutput", R"({"input_value":{"value":""}})") +
              R"(],"edges":[)" + edge("t", "text", "py", "input_value") + "," +
              edge("py", "results", "out", "input_value") + "]}";
  auto plain = run_flow(flow, R"("stream":true)");
  ASSERT_FALSE(plain.empty());
  ASSERT_EQ(plain.back().type, run_event::kind::complete) << plain.back().message;
  EXPECT_NE(encode(plain.back().run_outputs_list).find("got original"), std::string::npos);
  EXPECT_TRUE(plain.back().context().empty() || plain.back().context().text == "{}")
      << plain.back().context().text;

  auto events = run_flow(flow, R"("session_id":"sess-9","user_id":"user-3",)"
                               R"("context":{"locale":"fr","seen":[1,{"x":null}]},)"
                               R"("tweaks":{"t":{"input_value":"tweaked"}})");
  ASSERT_FALSE(events.empty());
  auto& last = events.back();
  ASSERT_EQ(last.type, run_event::kind::complete) << last.message;
  auto outputs = encode(last.run_outputs_list);
  // The tweak set the field before the vertex built (lfx's process_tweaks).
  EXPECT_NE(outputs.find("got tweaked"), std::string::npos) << outputs;
  EXPECT_EQ(outputs.find("original"), std::string::npos) << outputs;
  // The graph's context as the guest left it (its state frame), on the terminal event.
  EXPECT_EQ(last.context().text, R"({"locale":"fr","seen":[1,{"x":null}]})");
  // The session is the graph's: the chat output's message carries it.
  EXPECT_NE(outputs.find(R"("session_id":"sess-9")"), std::string::npos) << outputs;
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(serve_state_test, a_bad_state_field_is_refused_before_any_guest_naming_it) {
  for (auto& [extra, mentions] : std::vector<std::pair<std::string, std::string>>{
           {R"("context":[1])", "context: expected object"},
           {R"("tweaks":"x")", "tweaks: expected object"},
           {R"("variables":{"9X":"sk-do-not-echo-1234"})", "is not a variable name"},
           {R"("variables":{"K":5})", "variables.K: expected string"},
           {R"("history":[1])", "history[0]: expected object"},
       }) {
    auto r = call("POST", "/v1/runs", run_body("hello", extra));
    EXPECT_EQ(r.status, 400u) << extra << " → " << r.body;
    EXPECT_NE(r.body.find(mentions), std::string::npos) << extra << " → " << r.body;
    EXPECT_EQ(r.body.find("sk-do-not-echo-1234"), std::string::npos) << r.body;
  }
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(serve_state_test, a_failed_vertex_run_counts_as_an_error_outcome_not_complete) {
  // A run that stops at a failed vertex ends with `error` (guest_failed), never `complete`:
  // /metrics counts it under that outcome, streamed or not.
  auto flow = python_flow(R"j("raise ValueError('boom')")j");
  auto events = run_flow(flow, R"("inputs":"x","stream":true)");
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back().type, run_event::kind::error);
  EXPECT_EQ(events.back().code, ec::guest_failed);
  EXPECT_EQ(events.back().message, "Error building Component py: \n\nValueError: boom");
  auto r = call("POST", "/v1/runs", R"({"flow":)" + flow + R"(,"inputs":"x","stream":false})");
  EXPECT_EQ(r.status, 502u) << r.body;
  EXPECT_NE(r.body.find(R"("code":"guest_failed")"), std::string::npos) << r.body;
  EXPECT_EQ(metric("guestflow_runs_total{outcome=\"guest_failed\"}"), 2);
  EXPECT_EQ(metric("guestflow_runs_total{outcome=\"complete\"}"), 0);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}
