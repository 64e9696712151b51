#pragma once

#include "common/unique_fd.hpp"
#include "controlplane/local/service/capacity.hpp"
#include "controlplane/local/service/warm_pool_spec.hpp"
#include "messages/error.hpp"
#include "messages/image.hpp"
#include "messages/sandbox.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

/// The domain layer of the local control plane: the wire API's operations with no HTTP in
/// sight. Two implementations: `control_plane` (real guests) and `simulated_control_plane`
/// (no guests, a fixed latency per call: for measuring the runtime's own overhead).
/// Every method may block (backend, SQLite): the transport calls them from worker threads.
namespace guestflow::local {

/// Keeps a guest "in use" while alive: auto-pause never pauses a guest with a lease out.
/// Releasing the last lease stamps the guest's last activity.
class activity_lease {
public:
  activity_lease() = default;
  explicit activity_lease(std::function<void()> release)
      : release_(std::move(release)) {}
  activity_lease(activity_lease&& o) noexcept
      : release_(std::exchange(o.release_, nullptr)) {}
  activity_lease& operator=(activity_lease&& o) noexcept {
    if (this != &o) {
      reset();
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }
  activity_lease(const activity_lease&) = delete;
  activity_lease& operator=(const activity_lease&) = delete;
  ~activity_lease() { reset(); }

  void reset() {
    if (auto f = std::exchange(release_, nullptr)) f();
  }

private:
  std::function<void()> release_;
};

/// A file of a guest opened for one files call; closing it ends the activity.
struct guest_file {
  unique_fd fd;
  activity_lease lease;
};

/// How a command ended, as far as the domain knows (the transport adds output-cap notes).
struct exec_outcome {
  int32_t exit_code = 0;
  std::optional<std::string> error; ///< e.g. "out of memory (memory limit 64 MiB)"
  /// The command's own run (ms) as measured off the server (its exit watcher: guest_exec.hpp),
  /// which a stall of the server does not lengthen. nullopt: the transport measures it.
  std::optional<uint64_t> ran_ms;
};

/// A command running in a guest, driven by the transport: it watches the three fds
/// without blocking, then calls finish() on a worker thread.
class running_exec {
public:
  virtual ~running_exec() = default;
  /// O_NONBLOCK read end; EOF when the command closed it. -1: none (read as closed).
  virtual int stdout_fd() const = 0;
  virtual int stderr_fd() const = 0;
  /// Becomes readable once the command exited. -1: none (finish() alone tells the exit).
  virtual int exit_fd() const = 0;
  /// Hands stdout over to the reader instead of its being duplicated (one fd per command
  /// fewer: the simulated domain's canned output at 10,000 streams). Invalid: not offered.
  virtual unique_fd take_stdout() { return unique_fd{}; }
  /// Whether finish() measures the command's run itself (exec_outcome::ran_ms, an exit
  /// watcher's figure): then the transport does not look up when the process behind
  /// exit_fd() started (its /proc fdinfo and stat, two opens an exec), a figure used only
  /// when ran_ms is missing.
  virtual bool measures_run() const { return false; }
  /// SIGKILLs the command (its client went away). Cheap; safe after exit.
  virtual void kill() = 0;
  /// Reaps the command and closes its fds (blocking until it exited); ends the activity.
  virtual exec_outcome finish() = 0;
};

/// A relay's end for the proxy: an AF_UNIX stream socket whose first byte says the relay
/// connected (EOF before it: nothing listens), then the port's bytes both ways. `end` waits
/// for the relay to exit once the socket is closed and reaps it (blocking: on a worker).
struct ingress_relay {
  unique_fd sock;
  activity_lease end;
};

/// Where a service URL's connection goes (`open_ingress`): the guest's network namespace,
/// held open while it connects, and a lease that keeps the guest in use meanwhile.
struct ingress_target {
  bool authorized = true; ///< false: the token offered is not the guest's secret (401)
  unique_fd netns;        ///< /proc/<init>/ns/net of the guest
  activity_lease lease;
  /// A gVisor guest (empty netns: its loopback is the Sentry's own): starts a relay inside
  /// the guest to its 127.0.0.1:port. Blocking: call it on a worker.
  std::function<result<ingress_relay>(uint16_t port)> relay;
};

/// One proxied request's hold on its guest (`ingress_ready`): counted in use like an exec
/// until the lease ends. Its release takes the domain's lock and stamps the guest's last
/// activity; `release_blocks`: it also writes the guest's record (a persistent guest), so
/// it must end on a worker, never on the transport's io thread.
struct ingress_pass {
  activity_lease lease;
  bool release_blocks = false;
};

/// `GET /v1/sandboxes` filters.
struct list_query {
  std::optional<sandbox_status> status;
  uint64_t limit = 100;
  uint64_t offset = 0;
};

/// A view plus the guest's last notable event ("note"), which the wire view struct has no
/// field for; the transport adds it to `GET /v1/sandboxes/{id}` as `"note"`.
struct noted_view {
  sandbox_view view;
  std::string note;
};

class sandbox_service {
public:
  virtual ~sandbox_service() = default;

  virtual shape_list shapes() = 0;
  virtual capabilities caps() = 0;
  virtual whoami who() = 0;

  /// Validates everything before touching state; returns once the guest runs.
  virtual result<sandbox_created> create(const sandbox_create_request& req) = 0;
  virtual result<noted_view> view(const std::string& id) = 0;
  virtual result<sandbox_list> list(const list_query& q) = 0;
  virtual result<sandbox_deleted> destroy(const std::string& id) = 0;
  /// `DELETE /v1/sandboxes/{id}?if_idle_for=S`: the delete, but refused (409 "sandbox in
  /// use: …") while an exec or file call is in progress or one began or ended less than
  /// `idle_seconds` ago — checked in the same step that starts the delete, so no call can
  /// slip in between (the reaper of another process relies on it).
  virtual result<sandbox_deleted> destroy_if_idle(const std::string&, uint32_t) {
    return fail(ec::unavailable, "this control plane does not track calls in progress");
  }
  virtual result<sandbox_view> pause(const std::string& id) = 0;
  virtual result<sandbox_view> resume(const std::string& id) = 0;
  virtual result<egress_body> egress(const std::string& id) = 0;
  virtual result<egress_body> set_egress(const std::string& id, const egress_policy& p) = 0;

  /// Starts `req` in a running guest (409 paused / not running, 404 unknown).
  virtual result<std::unique_ptr<running_exec>> start_exec(const std::string& id,
                                                           const exec_request& req) = 0;

  /// Opens `path` inside the guest for reading or (truncating) writing.
  virtual result<guest_file> open_file(const std::string& id, const std::string& path,
                                       bool for_write) = 0;

  /// A service URL of guest `id` (`ANY /v1/sandboxes/{id}/ports/{port}/…`): `token` is the
  /// ingress secret the caller offered, nullopt when the API key already admitted it. 404
  /// for an unknown or deleted guest and for one made without ingress_enabled (checked
  /// before the token, which is checked before anything wakes); then, as exec and files
  /// do, a stopped persistent guest is started, a paused one refused (409).
  virtual result<ingress_target> open_ingress(const std::string& id,
                                              const std::optional<std::string>& /*token*/) {
    return fail(ec::not_found, "sandbox " + id + " has no service URLs on this control plane");
  }
  /// The fast path of a connection that already holds an upstream connection to the guest:
  /// a pass when the guest runs with service URLs and `token` (if any) is its secret,
  /// nullopt otherwise (open_ingress then says why). Never blocks (one lookup under the
  /// domain's lock): the transport calls it inline, once per proxied request.
  virtual std::optional<ingress_pass> ingress_ready(const std::string& /*id*/,
                                                    const std::optional<std::string>&) {
    return std::nullopt;
  }

  /// Whether an upload of `bytes` to `path` fits where it would land (the guest's disk
  /// quota); artifact_too_large (413) if not. Writes nothing. Default: nothing to check.
  virtual result<bool> check_upload_room(const std::string& /*id*/, const std::string& /*path*/,
                                         uint64_t /*bytes*/) {
    return true;
  }
  /// check_upload_room, then open_file for writing: one call where the transport has the
  /// whole body already (a small upload). The control plane proves the guest's root once
  /// for both.
  virtual result<guest_file> open_file_with_room(const std::string& id, const std::string& path,
                                                 uint64_t bytes) {
    if (auto room = check_upload_room(id, path, bytes); !room) return room.error();
    return open_file(id, path, true);
  }

  /// Pauses every guest idle past its auto_pause_after_seconds (times the configured
  /// scale); stops persistent ones idle past their idle_ttl_seconds (times the scale) and
  /// deletes those stopped past their delete_after_stop_seconds. Called periodically by the
  /// auto-pause timer.
  virtual void pause_idle() = 0;

  /// `POST /v1/sandboxes/{id}/stop`: a persistent guest's processes, cgroups and netns go,
  /// its workspace and record stay (`stopped`); its memory is no longer committed.
  virtual result<sandbox_view> stop(const std::string&) {
    return fail(ec::unavailable, "this control plane keeps no persistent sandboxes");
  }
  /// `POST /v1/sandboxes/{id}/start`: a stopped guest runs again from its kept workspace
  /// (same id, name, shape, egress, envs). Exec and files on a stopped guest do this first.
  virtual result<sandbox_view> start(const std::string&) {
    return fail(ec::unavailable, "this control plane keeps no persistent sandboxes");
  }

  /// `GET /v1/images`: every image a create's `rootfs` may name. Without an image store
  /// (the simulated domain), only the built-in debian:12.
  virtual result<image_list> images() {
    image_info builtin;
    builtin.name = std::string{builtin_image};
    builtin.kind = std::string{image_kind_builtin};
    builtin.source = "the host's /usr";
    return image_list{{builtin}, 1};
  }
  /// `POST /v1/images`: imports an image (blocks for as long as that takes).
  virtual result<image_added> add_image(const image_add_request&) {
    return fail(ec::unavailable, "this control plane keeps no images (it is simulated)");
  }
  /// `DELETE /v1/images/{name}`: refused while a guest that is not destroyed uses it.
  virtual result<image_removed> remove_image(const std::string&) {
    return fail(ec::unavailable, "this control plane keeps no images (it is simulated)");
  }

  /// `GET /v1/pool`: the warm pool's counts per (shape, image); empty without a pool.
  virtual std::vector<pool_status> pool() { return {}; }

  /// `GET /v1/capacity`: the node's budget, what its guests commit, drain and fence.
  virtual result<capacity_status> capacity() {
    return fail(ec::unavailable, "this control plane keeps no capacity (it is simulated)");
  }
  /// `POST /v1/drain` (true) / `DELETE /v1/drain` (false): creates refused with `capacity`
  /// while draining; existing guests run on. Returns the capacity afterwards.
  virtual result<capacity_status> drain(bool) {
    return fail(ec::unavailable, "this control plane keeps no capacity (it is simulated)");
  }

  /// Bench/test-only: how long every domain call is held before it runs. The transport
  /// waits on a timer, not a worker thread, so thousands of calls can wait at once. Zero
  /// (no wait) for real guests.
  virtual std::chrono::milliseconds simulated_latency() const { return {}; }
};

/// Conflicts with the guest's current state (a taken name, a paused or destroyed guest)
/// are 409 on the wire. messages/error.hpp has no `conflict` code, so the domain reports
/// them as `ec::paused` ("sandbox is paused") or `ec::policy_refused` (everything else).
inline failure conflict(std::string message) {
  return fail(ec::policy_refused, std::move(message));
}

} // namespace guestflow::local
