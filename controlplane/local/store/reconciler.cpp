#include "controlplane/local/store/reconciler.hpp"

#include "controlplane/local/service/clock.hpp"

#include <chrono>

namespace guestflow::local {
namespace {

/// Removes what is left of a guest; records a problem instead of failing the start.
void remove_leftovers(guest_backend& backend, guest_record& r, reconcile_report& report) {
  if (auto done = backend.destroy(r.runtime); !done) {
    report.problems.push_back(r.id + ": " + done.error().message);
    r.note = "leftovers not removed: " + done.error().message;
  }
}

/// A warm-pool guest: adopted when it runs, else removed with its record.
result<bool> reconcile_pooled(record_store& store, guest_backend& backend, guest_record& r,
                              reconcile_report& report) {
  if (r.status == sandbox_status::running && r.runtime.init_pid > 0 &&
      backend.alive(r.runtime)) {
    ++report.adopted;
    report.pooled.push_back(std::move(r));
    return true;
  }
  ++report.reaped;
  if (auto done = backend.destroy(r.runtime); !done) {
    report.problems.push_back(r.id + " (warm pool): " + done.error().message);
    r.status = sandbox_status::error;
    r.note = "leftovers not removed: " + done.error().message;
    return store.put(r);
  }
  return store.erase(r.id);
}

} // namespace

result<reconcile_report> reconcile(record_store& store, guest_backend& backend) {
  auto loaded = store.load_all();
  if (!loaded) return loaded.error();
  reconcile_report report;
  for (auto& r : *loaded) {
    if (r.pooled) {
      if (auto ok = reconcile_pooled(store, backend, r, report); !ok) return ok.error();
      continue;
    }
    if (!is_live(r.status)) {
      report.records.push_back(std::move(r));
      continue;
    }
    auto before = r.status;
    if (r.status == sandbox_status::destroying) {
      remove_leftovers(backend, r, report);
      r.status = sandbox_status::destroyed;
    } else if (r.status == sandbox_status::creating || r.runtime.init_pid <= 0 ||
               !backend.alive(r.runtime)) {
      r.status = sandbox_status::failed;
      r.note = before == sandbox_status::creating
                   ? "control plane stopped while the sandbox was being created"
                   : "guest init exited while the control plane was down";
      remove_leftovers(backend, r, report);
      ++report.reaped;
    } else if (r.status == sandbox_status::pausing) {
      auto p = backend.pause(r.runtime);
      r.status = p ? sandbox_status::paused : sandbox_status::running;
      if (p) r.paused_at = now_rfc3339();
      ++report.adopted;
    } else if (r.status == sandbox_status::resuming) {
      auto p = backend.resume(r.runtime);
      r.status = p ? sandbox_status::running : sandbox_status::paused;
      if (p) r.last_resumed_at = now_rfc3339();
      ++report.adopted;
    } else {
      ++report.adopted; // running or paused: nothing to do
    }
    if (!is_live(r.status) && r.ended_at == 0)
      r.ended_at = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
    if (r.status != before)
      if (auto ok = store.put(r); !ok) return ok.error();
    report.records.push_back(std::move(r));
  }
  return report;
}

} // namespace guestflow::local
