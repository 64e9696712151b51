#include "bridge/server/metrics.hpp"

#include <chrono>
#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::bridge;

namespace {

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

} // namespace

TEST(metrics, render_the_runtime_and_bridge_counters_as_prometheus_text) {
  metrics m;
  m.answered(endpoint::start_run, 200);
  m.answered(endpoint::start_run, 429);
  m.answered(endpoint::sandbox_run, 503);
  run_event done;
  done.type = run_event::kind::complete;
  m.finished(done);
  run_event failed;
  failed.type = run_event::kind::error;
  failed.code = ec::timeout;
  m.finished(failed);
  m.sent(7);
  m.streams(+2);
  m.streams(-1);
  runtime_stats rt;
  rt.runs.inflight = 3;
  rt.runs.queued = 2;
  rt.runs.accepted = 10;
  rt.guests.created = 9;
  rt.guests.deleted = 8;
  rt.guests.pending = 1;
  call_latency lat;
  lat.record(std::chrono::microseconds{500});
  lat.record(std::chrono::milliseconds{30});
  lat.record(std::chrono::seconds{20});
  auto text = m.render(rt, &lat);
  for (auto line : {"guestflow_runs_inflight 3",
                    "guestflow_runs_queued 2",
                    "guestflow_runs_accepted_total 10",
                    "guestflow_guests_created_total 9",
                    "guestflow_guests_deleted_total 8",
                    "guestflow_guests_pending_delete 1",
                    "guestflow_runs_total{outcome=\"complete\"} 1",
                    "guestflow_runs_total{outcome=\"timeout\"} 1",
                    "guestflow_run_events_sent_total 7",
                    "guestflow_streams_open 1",
                    "guestflow_http_requests_total{endpoint=\"start_run\",status=\"2xx\"} 1",
                    "guestflow_http_requests_total{endpoint=\"start_run\",status=\"4xx\"} 1",
                    "guestflow_http_requests_total{endpoint=\"sandbox_run\",status=\"5xx\"} 1",
                    "guestflow_controlplane_call_seconds_bucket{le=\"0.001\"} 1",
                    "guestflow_controlplane_call_seconds_bucket{le=\"0.025\"} 1",
                    "guestflow_controlplane_call_seconds_bucket{le=\"0.05\"} 2",
                    "guestflow_controlplane_call_seconds_bucket{le=\"10\"} 2",
                    "guestflow_controlplane_call_seconds_bucket{le=\"+Inf\"} 3",
                    "guestflow_controlplane_call_seconds_count 3",
                    "# TYPE guestflow_controlplane_call_seconds histogram"})
    EXPECT_TRUE(has_line(text, line)) << line << " not in\n" << text;
  // Without an observed client there is no histogram at all (not an empty one).
  EXPECT_EQ(m.render(rt, nullptr).find("controlplane_call_seconds"), std::string::npos);
}

TEST(metrics, count_every_terminal_outcome_including_the_last_code) {
  metrics m;
  for (auto i = 1; i <= static_cast<int>(last_ec); ++i) {
    run_event e;
    e.type = run_event::kind::error;
    e.code = static_cast<ec>(i);
    m.finished(e);
  }
  auto text = m.render(runtime_stats{}, nullptr);
  for (auto i = 1; i <= static_cast<int>(last_ec); ++i) {
    auto line = "guestflow_runs_total{outcome=\"" + std::string{to_string(static_cast<ec>(i))} +
                "\"} 1";
    EXPECT_TRUE(has_line(text, line)) << line << " not in\n" << text;
  }
  // cancelled (the last code) was once past the end of the counters and never reported.
  EXPECT_TRUE(has_line(text, "guestflow_runs_total{outcome=\"cancelled\"} 1")) << text;
}
