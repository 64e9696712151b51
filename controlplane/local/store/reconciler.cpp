#include "controlplane/local/store/reconciler.hpp"

#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/service/clock.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

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

/// A name as new_guest_id() makes them: `sb-` and 16 lower-case hex digits.
bool guest_id_like(const std::string& name) {
  if (name.size() != 19 || name.compare(0, 3, "sb-") != 0) return false;
  for (size_t i = 3; i < name.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(name[i])) && (name[i] < 'a' || name[i] > 'f'))
      return false;
  return true;
}

/// See reconcile(): empty, old guest cgroup directories no live record names.
void remove_stray_cgroups(const std::set<std::string>& named, reconcile_report& report) {
  auto layout = detect_cgroups();
  if (!layout) return; // the backend refused to start without them already
  std::vector<std::string> parents;
  if (layout->v2)
    parents.push_back(layout->v2_root + "/guestflow");
  else
    for (const auto& [controller, mount] : layout->v1_mounts)
      parents.push_back(mount + "/guestflow");
  std::set<std::string> ids;
  for (const auto& parent : parents) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it{parent, ec}, end; !ec && it != end;
         it.increment(ec)) {
      auto name = it->path().filename().string();
      if (guest_id_like(name) && !named.count(name) && it->is_directory(ec)) ids.insert(name);
    }
  }
  const auto old_enough = std::chrono::system_clock::now() - stray_cgroup_grace;
  for (const auto& id : ids) {
    auto dirs = guest_cgroup_dirs(*layout, id);
    bool stray = true;
    for (const auto& d : dirs) {
      struct stat st {};
      if (::stat(d.c_str(), &st) != 0) continue; // not in this controller
      auto mtime = std::chrono::system_clock::time_point{
          std::chrono::duration_cast<std::chrono::system_clock::duration>(
              std::chrono::seconds{st.st_mtim.tv_sec} +
              std::chrono::nanoseconds{st.st_mtim.tv_nsec})};
      if (mtime > old_enough || !cgroup_pids(d).empty()) stray = false;
    }
    if (!stray) continue;
    std::string failed;
    for (const auto& d : dirs)
      if (::rmdir(d.c_str()) != 0 && errno != ENOENT)
        failed += (failed.empty() ? "" : "; ") + d + ": " + std::strerror(errno);
    if (failed.empty())
      ++report.stray_cgroups;
    else
      report.problems.push_back(id + " (cgroups no record names): " + failed);
  }
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
  std::set<std::string> named;
  for (const auto& r : report.records)
    if (is_live(r.status)) named.insert(r.id);
  for (const auto& r : report.pooled)
    named.insert(r.id);
  remove_stray_cgroups(named, report);
  report.stray_gvisor_state = backend.remove_stray_gvisor_state(named);
  return report;
}

} // namespace guestflow::local
