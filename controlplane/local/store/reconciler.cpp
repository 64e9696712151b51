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

/// A persistent guest: stopped stays stopped; one whose processes are gone (a host reboot,
/// a kill), or caught stopping or starting, is stopped — its leftovers (cgroups, netns)
/// removed, its workspace kept for the next start (which checks it with e2fsck -p). Returns
/// false when the guest runs on: the common path adopts or drives it.
bool reconcile_persistent(record_store&, guest_backend& backend, guest_record& r,
                          reconcile_report& report) {
  if (r.status == sandbox_status::stopped) {
    ++report.adopted;
    return true;
  }
  bool alive = r.runtime.init_pid > 0 && backend.alive(r.runtime);
  if (alive && r.status != sandbox_status::stopping) {
    if (r.status == sandbox_status::starting) {
      r.status = sandbox_status::running; // built before the control plane stopped
      ++report.adopted;
      return true;
    }
    return false;
  }
  auto before = r.status;
  if (auto done = backend.stop(r.runtime); !done) {
    report.problems.push_back(r.id + ": " + done.error().message);
    r.status = sandbox_status::error;
    r.note = "leftovers not removed: " + done.error().message;
    return true;
  }
  r.status = sandbox_status::stopped;
  r.stopped_at = now_rfc3339();
  r.stopped_unix = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  r.note = before == sandbox_status::stopping
               ? "control plane stopped while the sandbox was stopping; stopped, workspace kept"
               : "guest processes gone while the control plane was down; stopped, workspace "
                 "kept";
  guest_runtime kept;
  kept.id = r.runtime.id.empty() ? r.id : r.runtime.id;
  kept.workspace = r.runtime.workspace;
  r.runtime = kept;
  ++report.adopted;
  return true;
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
    if (r.persistent && r.status != sandbox_status::creating &&
        r.status != sandbox_status::destroying) {
      if (reconcile_persistent(store, backend, r, report)) {
        if (r.status != before)
          if (auto ok = store.put(r); !ok) return ok.error();
        report.records.push_back(std::move(r));
        continue;
      }
    }
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
