#include "bridge/server/metrics.hpp"

#include <cstdio>

namespace guestflow::bridge {

namespace {

/// Appends `# HELP`/`# TYPE` for one metric family.
void family(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void sample(std::string& out, const std::string& name_and_labels, double v) {
  char num[64];
  std::snprintf(num, sizeof num, "%.17g", v);
  out += name_and_labels;
  out += ' ';
  out += num;
  out += '\n';
}

void sample(std::string& out, const std::string& name_and_labels, uint64_t v) {
  out += name_and_labels;
  out += ' ';
  out += std::to_string(v);
  out += '\n';
}

/// One unlabelled metric: its family lines and its sample.
template<class V>
void single(std::string& out, const char* name, const char* type, const char* help, V v) {
  family(out, name, type, help);
  sample(out, name, v);
}

} // namespace

void metrics::answered(endpoint ep, unsigned status) noexcept {
  auto cls = status < 400 ? 0 : status < 500 ? 1 : 2;
  requests_[static_cast<size_t>(ep) * status_classes + cls].fetch_add(
      1, std::memory_order_relaxed);
}

void metrics::finished(const run_event& terminal) noexcept {
  auto i = terminal.type == run_event::kind::complete ? 0 : static_cast<size_t>(terminal.code);
  if (i < outcomes) outcomes_[i].fetch_add(1, std::memory_order_relaxed);
}

std::string metrics::render(const runtime_stats& rt, const call_latency* cp) {
  std::string out;
  out.reserve(8 * 1024);
  single(out, "guestflow_runs_inflight", "gauge", "Flow runs holding an execution slot.",
         rt.runs.inflight);
  single(out, "guestflow_runs_queued", "gauge", "Admitted flow runs waiting for a slot.",
         rt.runs.queued);
  single(out, "guestflow_runs_accepted_total", "counter", "Flow runs admitted since start.",
         rt.runs.accepted);
  single(out, "guestflow_runs_refused_total", "counter",
         "Flow runs refused with capacity (queue full).", rt.runs.refused);
  single(out, "guestflow_runs_finished_total", "counter",
         "Flow runs that emitted their terminal event.", rt.runs.finished);
  family(out, "guestflow_runs_total", "counter",
         "Flow runs whose terminal event reached a bridge client, by outcome.");
  sample(out, "guestflow_runs_total{outcome=\"complete\"}", outcomes_[0].load());
  for (size_t i = 1; i < outcomes; ++i)
    sample(out,
           "guestflow_runs_total{outcome=\"" + std::string{to_string(static_cast<ec>(i))} +
               "\"}",
           outcomes_[i].load());

  single(out, "guestflow_guests_created_total", "counter", "Ephemeral guests created.",
         rt.guests.created);
  single(out, "guestflow_guests_deleted_total", "counter", "Ephemeral guests deleted.",
         rt.guests.deleted);
  single(out, "guestflow_guests_pending_delete", "gauge",
         "Guests whose delete the reaper still owes.", rt.guests.pending);
  single(out, "guestflow_guests_tracked", "gauge",
         "Ephemeral guests owned by a live execution.", rt.guests.tracked);
  single(out, "guestflow_guest_delete_failures_total", "counter",
         "Delete attempts that failed (each is retried).", rt.guests.failed_deletes);

  if (cp != nullptr) {
    family(out, "guestflow_controlplane_call_seconds", "histogram",
           "Control-plane call latency, request to answer.");
    uint64_t cumulative = 0;
    char le[32];
    for (size_t i = 0; i < call_latency::bounds.size(); ++i) {
      cumulative += cp->count(i);
      std::snprintf(le, sizeof le, "%g", call_latency::bounds[i]);
      sample(out, std::string{"guestflow_controlplane_call_seconds_bucket{le=\""} + le + "\"}",
             cumulative);
    }
    cumulative += cp->count(call_latency::bounds.size());
    sample(out, "guestflow_controlplane_call_seconds_bucket{le=\"+Inf\"}", cumulative);
    sample(out, "guestflow_controlplane_call_seconds_sum", cp->sum_seconds());
    sample(out, "guestflow_controlplane_call_seconds_count", cumulative);
  }

  auto events = events_.load();
  double rate = 0;
  {
    std::lock_guard<std::mutex> guard{rate_mu_};
    auto now = std::chrono::steady_clock::now();
    auto secs = std::chrono::duration<double>(now - last_scrape_).count();
    if (secs > 0) rate = static_cast<double>(events - last_events_) / secs;
    last_scrape_ = now;
    last_events_ = events;
  }
  single(out, "guestflow_run_events_sent_total", "counter", "Run events sent to clients.",
         events);
  single(out, "guestflow_run_events_per_second", "gauge",
         "Run events sent per second since the previous scrape.", rate);
  family(out, "guestflow_streams_open", "gauge", "Streamed run responses being sent.");
  sample(out, "guestflow_streams_open",
         static_cast<uint64_t>(std::max<int64_t>(0, open_streams_.load())));
  single(out, "guestflow_slow_clients_dropped_total", "counter",
         "Streamed clients dropped for falling behind or not reading.", slow_.load());

  family(out, "guestflow_http_requests_total", "counter",
         "Answered requests by endpoint and status class.");
  static constexpr const char* classes[] = {"2xx", "4xx", "5xx"};
  for (size_t e = 0; e < endpoints; ++e)
    for (size_t c = 0; c < status_classes; ++c)
      sample(out,
             std::string{"guestflow_http_requests_total{endpoint=\""} +
                 std::string{label(static_cast<endpoint>(e))} + "\",status=\"" + classes[c] +
                 "\"}",
             requests_[e * status_classes + c].load());
  return out;
}

} // namespace guestflow::bridge
