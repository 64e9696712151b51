// Persistent guests: stop (processes gone, workspace kept), start from the kept workspace,
// wake on use, idle TTL and retention. gVisor guests stop by checkpoint and start by
// restore (gvisor_checkpoint.hpp). The rest of control_plane is control_plane.cpp.
#include "controlplane/local/guests/guest_mounts.hpp"
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <chrono>

namespace guestflow::local {
namespace {

/// How long an exec or file call waits for a guest another call is stopping or starting.
constexpr auto settle_timeout = std::chrono::seconds(60);

std::string status_name(sandbox_status s) {
  return std::string{to_string(s)};
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

failure not_persistent(const std::string& id, const char* verb) {
  return conflict("sandbox " + id + " is not persistent (created without \"persistent\": " +
                  "true); only a persistent sandbox can be " + verb +
                  " — pause or delete it instead");
}

} // namespace

result<sandbox_view> control_plane::stop(const std::string& id) {
  return stop_guest(id, false, "");
}

result<sandbox_view> control_plane::stop_guest(const std::string& id, bool only_if_idle,
                                               const std::string& note) {
  guest_runtime rt;
  bool was_paused = false;
  std::unique_ptr<python_waiter> waiter; // reaped once stop() killed it
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find(id);
    if (!g) return g.error();
    auto& rec = (*g)->rec;
    if (!rec.persistent) return not_persistent(id, "stopped");
    switch (rec.status) {
    case sandbox_status::stopped:
    case sandbox_status::stopping: // another stop is on it
      return to_view(rec);
    case sandbox_status::running:
    case sandbox_status::paused:
      break;
    default:
      return conflict("sandbox is " + status_name(rec.status) +
                      "; only a running or paused sandbox can be stopped");
    }
    // Checked again here: a call may have come and gone since the sweep looked.
    if (only_if_idle &&
        ((*g)->busy > 0 ||
         std::chrono::duration<double>(clock::now() - (*g)->last_activity).count() <
             rec.idle_ttl_seconds * cfg_.auto_pause_scale))
      return conflict("sandbox is busy");
    was_paused = rec.status == sandbox_status::paused;
    rec.status = sandbox_status::stopping;
    if (auto ok = save(**g); !ok) {
      rec.status = sandbox_status::running;
      return ok.error();
    }
    rt = rec.runtime;
    waiter = std::move((*g)->waiter);
  }
  // gVisor keeps the memory: the sandbox goes into a checkpoint beside its workspace first
  // (thawed if paused: a frozen sandbox cannot write one). One that fails is noted and the
  // stop goes on; the next start then boots cold from the kept disk.
  std::string memory_note;
  if (rt.isolation == guest_isolation::gvisor) {
    if (was_paused) backend_.resume(rt);
    if (auto cp = backend_.checkpoint(rt, checkpoint_dir(rt.workspace.parent_path())); !cp)
      memory_note = "memory not kept (" + cp.error().message + "); the next start boots cold";
  }
  auto done = backend_.stop(rt);
  waiter.reset();
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(id);
  settled_.notify_all();
  gate_.changed();
  if (!done) {
    // Some of it may still run: error, which only a delete (destroy's full teardown) ends.
    g.rec.status = sandbox_status::error;
    g.rec.note = "stop failed: " + done.error().message;
    save(g);
    return fail(ec::unavailable, "stop of " + id + " failed (" + done.error().message +
                                     "); delete the sandbox (its workspace goes with it)");
  }
  g.rec.status = sandbox_status::stopped;
  g.rec.stopped_at = now_rfc3339();
  g.rec.stopped_unix = unix_now();
  // Only the id and the workspace outlive a stop: cgroups, netns, init are gone.
  guest_runtime kept;
  kept.id = g.rec.runtime.id;
  kept.isolation = g.rec.runtime.isolation; // a start builds the same kind
  kept.workspace = g.rec.runtime.workspace;
  g.rec.runtime = kept;
  if (!note.empty()) g.rec.note = note;
  if (!memory_note.empty()) g.rec.note = note.empty() ? memory_note : note + "; " + memory_note;
  if (auto ok = save(g); !ok) return ok.error();
  return to_view(g.rec);
}

result<guest_spec> control_plane::begin_start(guest& g) {
  auto& rec = g.rec;
  auto shp = find_shape(rec.shape);
  if (!shp) return fail(ec::unavailable, "shape " + rec.shape + " is no longer offered");
  auto image = images_.resolve(rec.rootfs);
  if (!image) return image.error();
  // Its mounts checked again: the operator may have narrowed the roots since.
  auto mounts = resolve_mounts(rec.mounts, mount_roots_from_env());
  if (!mounts) return mounts.error();
  // The same gate as a create: its memory is committed again.
  if (auto full = admit(*shp)) return *full;
  guest_spec spec;
  spec.id = rec.id;
  spec.name = rec.name;
  spec.isolation = rec.runtime.isolation;
  spec.shape_info = *shp;
  spec.rootfs = image->name;
  spec.image = image->layout;
  spec.egress = rec.egress;
  spec.envs = rec.envs;
  spec.mounts = *mounts;
  spec.kept_workspace = true;
  // Under the shared workspace root: the directory the record names (not the state dir).
  if (!cfg_.workspace_root.empty() && !rec.runtime.workspace.empty() &&
      rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root)
    spec.guest_dir = rec.runtime.workspace.parent_path();
  rec.status = sandbox_status::starting;
  if (auto ok = save(g); !ok) {
    rec.status = sandbox_status::stopped;
    return ok.error();
  }
  g.path_prepend = image->path_prepend;
  gate_.changed();
  return spec;
}

result<sandbox_view> control_plane::finish_start(const guest_spec& spec) {
  // Owned by this node first: one another node took over is forgotten, never started.
  if (auto mine = may_start(spec); !mine) {
    std::lock_guard<std::mutex> lock{mu_};
    auto& g = guests_.at(spec.id);
    if (g.rec.status == sandbox_status::starting) {
      g.rec.status = sandbox_status::stopped;
      save(g);
      settled_.notify_all();
      gate_.changed();
    }
    return mine.error();
  }
  std::filesystem::path memory; // a gVisor guest's checkpoint, beside its kept workspace
  {
    std::lock_guard<std::mutex> lock{mu_};
    memory = checkpoint_dir(guests_.at(spec.id).rec.runtime.workspace.parent_path());
  }
  auto built = restore_or_boot(backend_, spec, memory, "checkpoint");
  auto& rt = built.rt;
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(spec.id);
  settled_.notify_all();
  gate_.changed();
  if (!rt) {
    // The backend removed what it built and kept the workspace: stopped as before.
    g.rec.status = sandbox_status::stopped;
    g.rec.note = "start failed: " + rt.error().message;
    save(g);
    return rt.error();
  }
  g.rec.runtime = *rt;
  g.rec.status = sandbox_status::running;
  if (spec.isolation == guest_isolation::gvisor) {
    g.rec.started_from = built.started_from;
    g.rec.restore_error.reset();
    if (!built.restore_error.empty()) g.rec.restore_error = built.restore_error;
  }
  if (!built.restore_error.empty())
    g.rec.note = built.restore_error;
  else if (built.started_from == "checkpoint")
    g.rec.note = "started from its checkpoint: processes and memory as they were at the stop";
  g.rec.stopped_at.reset();
  g.rec.stopped_unix = 0;
  g.rec.last_resumed_at = now_rfc3339();
  g.last_activity = clock::now();
  auto ok = save(g);
  if (ok && !spec.guest_dir.empty()) ok = watch_shared(*rt); // a shared guest
  if (!ok) {
    // Running but not recorded as such (or not tied to this process's life): stopped
    // again, so that the record is the truth.
    backend_.stop(*rt);
    g.rec.status = sandbox_status::stopped;
    g.rec.runtime.init_pid = 0;
    return ok.error();
  }
  return to_view(g.rec);
}

result<sandbox_view> control_plane::start(const std::string& id) {
  result<guest_spec> spec = fail(ec::unavailable, "not started");
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find(id);
    if (!g) return g.error();
    auto& rec = (*g)->rec;
    if (!rec.persistent) return not_persistent(id, "started");
    if (rec.status == sandbox_status::running) return to_view(rec); // idempotent
    if (rec.status == sandbox_status::starting)
      return conflict("sandbox is starting (another start is building it); wait for it to "
                      "be running");
    if (rec.status != sandbox_status::stopped)
      return conflict("sandbox is " + status_name(rec.status) +
                      "; only a stopped sandbox can be started");
    spec = begin_start(**g);
    if (!spec) return spec.error();
  }
  return finish_start(*spec);
}

result<bool> control_plane::wake(const std::string& id) {
  auto deadline = clock::now() + settle_timeout;
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    auto i = guests_.find(id);
    if (i == guests_.end() || !i->second.rec.persistent) return true; // find() answers
    auto& g = i->second;
    switch (g.rec.status) {
    case sandbox_status::stopped: {
      auto spec = begin_start(g);
      if (!spec) return spec.error();
      lock.unlock();
      auto started = finish_start(*spec);
      if (!started) return started.error();
      return true;
    }
    case sandbox_status::stopping:
    case sandbox_status::starting:
      if (settled_.wait_until(lock, deadline) == std::cv_status::timeout)
        return fail(ec::transient,
                    "sandbox " + id + " is still " + status_name(g.rec.status) + "; retry");
      continue;
    default:
      return true;
    }
  }
}

void control_plane::stop_idle() {
  std::vector<std::string> idle, expired;
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto now = clock::now();
    auto now_s = unix_now();
    for (const auto& [id, g] : guests_) {
      if (!g.rec.persistent) continue;
      auto s = g.rec.status;
      if ((s == sandbox_status::running || s == sandbox_status::paused) && g.busy == 0 &&
          g.rec.idle_ttl_seconds > 0 &&
          std::chrono::duration<double>(now - g.last_activity).count() >=
              g.rec.idle_ttl_seconds * cfg_.auto_pause_scale)
        idle.push_back(id);
      // Whole seconds on both sides: a guest stopped at x.999 would pass `>=` one
      // millisecond later at x+1.0. `>` keeps it stopped at least the seconds asked for.
      else if (s == sandbox_status::stopped && g.rec.delete_after_stop_seconds > 0 &&
               now_s - g.rec.stopped_unix > int64_t{g.rec.delete_after_stop_seconds})
        expired.push_back(id);
    }
  }
  for (const auto& id : idle) {
    auto r = stop_guest(id, true, "stopped after its idle TTL");
    if (!r && cfg_.warn) cfg_.warn("idle stop of " + id + ": " + r.error().message);
  }
  for (const auto& id : expired) {
    auto r = destroy(id);
    if (!r && cfg_.warn) cfg_.warn("delete after stop of " + id + ": " + r.error().message);
  }
}

} // namespace guestflow::local
