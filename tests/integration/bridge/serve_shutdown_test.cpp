// SIGTERM of `guestflow serve` with real guests busy: every caller gets a final answer
// saying the server is shutting down, no guest is left, and the process exits in time.

#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/support/eventually.hpp"

#include <csignal>
#include <future>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class serve_shutdown_test : public bridge_fixture {
protected:
  /// The slow example flow with its Python vertex sleeping `seconds` instead of 2.
  static std::string sleeping_flow(int seconds, const std::string& extra = {}) {
    auto body = run_body("slow", "\"inputs\":\"x\"" + extra);
    auto at = body.find("sleep(2)");
    EXPECT_NE(at, std::string::npos);
    return body.replace(at, 8, "sleep(" + std::to_string(seconds) + ")");
  }

  /// A sandbox run of a program that sleeps for `seconds`.
  static std::string sleeping_code(int seconds) {
    return "{\"code\":\"import time\\ntime.sleep(" + std::to_string(seconds) +
           ")\",\"timeout_seconds\":600}";
  }

  /// The rest of a buffered answer's body.
  static std::string body_of(http_stream& s) {
    std::string out;
    while (auto line = s.next_line(30s))
      out += *line;
    return out;
  }
};

} // namespace

TEST_F(serve_shutdown_test, sigterm_ends_every_run_with_unavailable_and_leaves_no_guest) {
  auto streamed = stream("POST", "/v1/runs", sleeping_flow(300));
  ASSERT_EQ(streamed->status(), 200u);
  ASSERT_TRUE(streamed->next_line(60s)); // the run is under way
  auto buffered = stream("POST", "/v1/sandbox/run", sleeping_code(300));
  auto collected_flow = stream("POST", "/v1/runs", sleeping_flow(300, ",\"stream\":false"));
  ASSERT_TRUE(wait_for_live(3));

  auto started = std::chrono::steady_clock::now();
  auto stopped = std::async(std::launch::async, [&] { return serve->stop(60s); });

  auto events = drain(*streamed);
  ASSERT_FALSE(events.empty());
  auto& last = events.back();
  EXPECT_EQ(last.type, run_event::kind::error);
  EXPECT_EQ(last.code, ec::unavailable);
  EXPECT_NE(last.message.find("shutting down"), std::string::npos) << last.message;

  EXPECT_EQ(buffered->status(), 503u);
  auto body = body_of(*buffered);
  EXPECT_NE(body.find("\"code\":\"unavailable\""), std::string::npos) << body;
  EXPECT_NE(body.find("shutting down"), std::string::npos) << body;

  EXPECT_EQ(collected_flow->status(), 503u);
  auto flow_body = body_of(*collected_flow);
  EXPECT_NE(flow_body.find("\"code\":\"unavailable\""), std::string::npos) << flow_body;

  EXPECT_EQ(stopped.get(), 0) << serve->stderr_text();
  // The stated bound (GUESTFLOW_SHUTDOWN_SECONDS, 30 s by default) — not a speed claim.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
  // Every delete was asked for before the exit; a guest may still be `destroying` while
  // the control plane finishes the teardown it started.
  EXPECT_TRUE(wait_for_live(0)) << serve->stderr_text();
}

TEST_F(serve_shutdown_test, a_stop_that_cannot_finish_still_exits_within_the_bound) {
  // The control plane stops answering (SIGSTOP): the guest's delete cannot complete.
  start_serve({{"GUESTFLOW_SHUTDOWN_SECONDS", "3"}});
  auto buffered = stream("POST", "/v1/sandbox/run", sleeping_code(300));
  ASSERT_TRUE(wait_for_live(1));
  ASSERT_EQ(::kill(cp->pid(), SIGSTOP), 0);
  auto status = serve->stop(30s);
  ::kill(cp->pid(), SIGCONT);
  EXPECT_EQ(status, 125) << serve->stderr_text();
  EXPECT_NE(serve->stderr_text().find("GUESTFLOW_SHUTDOWN_SECONDS"), std::string::npos)
      << serve->stderr_text();
  // As promised beside exit 125: the next start sweeps the guest the stopped one owed.
  start_serve({{"GUESTFLOW_SWEEP_GRACE_SECONDS", "0"}});
  EXPECT_TRUE(wait_for_live(0)) << serve->stderr_text();
}
