#include "controlplane/local/service/control_plane.hpp"

#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/guests/guest_mounts.hpp"
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <algorithm>
#include <chrono>

namespace guestflow::local {
namespace {

std::string status_name(sandbox_status s) {
  return std::string{to_string(s)};
}

/// The egress modes that need nftables: everything but deny-all (allow-all still needs the
/// rules that keep the host's loopback, the control plane and 169.254/16 out of reach).
bool needs_rules(const egress_policy& p) {
  return p.mode != egress_policy::kind::deny_all;
}

/// Whether a guest in `s` holds its shape's memory on this host (a stopped one holds only
/// its workspace image on disk).
bool holds_capacity(sandbox_status s) {
  return s != sandbox_status::destroyed && s != sandbox_status::failed &&
         s != sandbox_status::stopped;
}

/// Whether a record is one pruning forgets once old enough.
bool ended(sandbox_status s) {
  return s == sandbox_status::destroyed || s == sandbox_status::failed;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The isolation a create asked for: a name this control plane knows and can give, or a
/// refusal naming it (never a weaker guest instead).
result<guest_isolation> requested_isolation(const std::optional<std::string>& asked,
                                            const host_support& host) {
  if (!asked) return guest_isolation::namespaces;
  auto kind = isolation_from_string(*asked);
  if (!kind)
    return fail(ec::bad_request, "isolation \"" + *asked +
                                     "\" is not offered by this control plane; it offers "
                                     "\"namespaces\" and \"gvisor\"");
  if (*kind == guest_isolation::gvisor && !host.gvisor)
    return fail(ec::unavailable, host.gvisor_problem);
  return *kind;
}

failure rules_unavailable() {
  return fail(ec::unavailable,
              "egress rules cannot be enforced on this host (nftables unavailable); use egress "
              "[\"240.0.0.0/4\"] (no network) or install nftables");
}

/// A command started by the backend; finish() reaps it and turns an OOM kill into an error.
class guest_command final : public running_exec {
public:
  guest_command(guest_backend& backend, guest_runtime rt, exec_process p, activity_lease lease,
                uint64_t oom_before, uint64_t mem_mib, std::function<void(std::string)> on_oom,
                std::function<std::string(std::string)> on_lost)
      : backend_(backend)
      , rt_(std::move(rt))
      , p_(p)
      , lease_(std::move(lease))
      , oom_before_(oom_before)
      , mem_mib_(mem_mib)
      , on_oom_(std::move(on_oom))
      , on_lost_(std::move(on_lost)) {}

  ~guest_command() override {
    if (!finished_) {
      backend_.kill_exec(p_);
      backend_.reap(p_);
    }
  }

  int stdout_fd() const override { return p_.stdout_fd; }
  int stderr_fd() const override { return p_.stderr_fd; }
  int exit_fd() const override { return p_.pidfd; }
  /// A watcher's timing pipe or a waiter's status line (guest_backend.hpp, exec_process::ran).
  bool measures_run() const override { return p_.timing_fd >= 0 || p_.status_fd >= 0; }
  void kill() override {
    if (!finished_) backend_.kill_exec(p_);
  }

  exec_outcome finish() override {
    exec_outcome out;
    out.exit_code = backend_.reap(p_);
    if (p_.ran)
      out.ran_ms =
          uint64_t(std::chrono::duration_cast<std::chrono::milliseconds>(*p_.ran).count());
    finished_ = true;
    if (out.exit_code == 137 && backend_.oom_kills(rt_) > oom_before_) {
      out.error = "out of memory (memory limit " + std::to_string(mem_mib_) + " MiB)";
      on_oom_(*out.error);
    }
    // The command's writes reached the host, or the answer says they did not: never a
    // success for data the kernel dropped (workspace_disk.hpp).
    auto synced = backend_.sync_workspace(rt_);
    lease_.reset();
    if (!synced) {
      auto why = synced.error().message + " (the command exited " +
                 std::to_string(out.exit_code) + ")";
      out.error = on_lost_(std::move(why)) + (out.error ? "; " + *out.error : "");
    }
    return out;
  }

private:
  guest_backend& backend_;
  guest_runtime rt_;
  exec_process p_;
  activity_lease lease_;
  uint64_t oom_before_;
  uint64_t mem_mib_;
  std::function<void(std::string)> on_oom_;
  std::function<std::string(std::string)> on_lost_; ///< returns the error to answer
  bool finished_ = false;
};

} // namespace

control_plane::control_plane(guest_backend& backend, record_store& store, image_store& images,
                             control_plane_config cfg, std::vector<guest_record> records,
                             std::vector<guest_record> pooled)
    : backend_(backend)
    , store_(store)
    , images_(images)
    , cfg_(std::move(cfg))
    , gate_(cfg_.node.empty() ? host_node_name() : cfg_.node, cfg_.capacity) {
  for (auto& r : records) {
    next_seq_ = std::max(next_seq_, r.seq + 1);
    auto id = r.id;
    guest g;
    g.rec = std::move(r);
    // Ended before records said when (or by a reconcile just now): the retention counts
    // from this start.
    if (ended(g.rec.status) && g.rec.ended_at == 0) {
      g.rec.ended_at = unix_now();
      save(g);
    }
    if (is_live(g.rec.status)) {
      if (auto image = images_.resolve(g.rec.rootfs)) g.path_prepend = image->path_prepend;
      // Taken from the pool by a server that died before the guest's first exec.
      python_waiter::kill_stale(g.rec.runtime);
    }
    guests_.emplace(id, std::move(g));
  }
  // Shared guests adopted alive (their previous control plane had no watchdog) are tied to
  // this one's life from now on.
  if (!cfg_.workspace_root.empty())
    for (const auto& [id, g] : guests_)
      if (g.rec.persistent && !g.rec.runtime.cgroup_dirs.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root &&
          (g.rec.status == sandbox_status::running || g.rec.status == sandbox_status::paused))
        if (auto ok = watch_shared(g.rec.runtime); !ok && cfg_.warn)
          cfg_.warn("sandbox " + id + ": " + ok.error().message);
  // Last: its filler starts at once.
  if (!cfg_.warm_pool.empty() || !pooled.empty()) {
    warm_pool::settings ps;
    ps.targets = cfg_.warm_pool;
    ps.warn = cfg_.warn;
    ps.python_waiter = cfg_.pool_python && python_waiter_wanted();
    // On loan: the pool builds only into room no create has taken (mutex held; the pool
    // passes what it holds itself, as pool_ is not set yet while its builders start).
    ps.room = [this](const shape& s, const capacity_usage& pool) {
      auto u = guest_usage();
      u.memory_mib += pool.memory_mib;
      u.guests += pool.guests;
      return !gate_.admit(u, s);
    };
    pool_ = std::make_unique<warm_pool>(backend_, store_, images_, mu_, std::move(ps),
                                        std::move(pooled));
  }
}

control_plane::~control_plane() {
  stop_pool();
  end_watch();
}

size_t control_plane::stop_pool() {
  return pool_ ? pool_->stop() : 0;
}

void control_plane::halt_pool() {
  if (pool_) pool_->halt();
}

std::vector<pool_status> control_plane::pool() {
  std::lock_guard<std::mutex> lock{mu_};
  return pool_ ? pool_->status() : std::vector<pool_status>{};
}

capacity_usage control_plane::usage() {
  auto u = guest_usage();
  if (pool_) {
    auto held = pool_->held();
    u.memory_mib += held.memory_mib;
    u.guests += held.guests;
  }
  return u;
}

capacity_usage control_plane::guest_usage() {
  capacity_usage u;
  auto add = [&u](const std::string& shape_id, uint64_t n) {
    if (auto s = find_shape(shape_id)) u.memory_mib += s->mem_mib * n;
    u.guests += static_cast<uint32_t>(n);
  };
  for (const auto& [id, g] : guests_)
    if (holds_capacity(g.rec.status)) add(g.rec.shape, 1);
  return u;
}

std::optional<failure> control_plane::admit(const shape& shp) {
  return gate_.admit(usage(), shp);
}

std::optional<failure> control_plane::admit_lending(const shape& shp,
                                                    std::vector<pool_guest>& victims) {
  auto full = admit(shp);
  if (!full || !pool_ || !gate_.ready() || gate_.draining()) return full;
  victims = pool_->lend([&](const capacity_usage& freed) {
    auto u = usage();
    u.memory_mib -= std::min(u.memory_mib, freed.memory_mib);
    u.guests -= std::min(u.guests, freed.guests);
    return !gate_.admit(u, shp);
  });
  return admit(shp);
}

result<capacity_status> control_plane::capacity() {
  std::lock_guard<std::mutex> lock{mu_};
  return gate_.status(usage());
}

result<capacity_status> control_plane::drain(bool on) {
  gate_.set_draining(on);
  return capacity();
}

size_t control_plane::prune_destroyed() {
  std::lock_guard<std::mutex> lock{mu_};
  auto cutoff = unix_now() - cfg_.destroyed_retention.count();
  std::vector<std::string> due;
  for (const auto& [id, g] : guests_)
    if (ended(g.rec.status) && g.rec.ended_at <= cutoff) due.push_back(id);
  if (due.empty()) return 0;
  // Forgotten only once the store forgot them: a restart must not bring them back.
  if (auto ok = store_.erase_all(due); !ok) {
    if (cfg_.warn) cfg_.warn("pruning destroyed sandbox records failed: " + ok.error().message);
    return 0;
  }
  for (const auto& id : due)
    guests_.erase(id);
  return due.size();
}

shape_list control_plane::shapes() {
  return shape_catalog();
}

capabilities control_plane::caps() {
  capabilities c;
  c.isolation = "namespaces";
  c.isolations = {"namespaces"};
  if (backend_.support().gvisor) c.isolations.push_back("gvisor");
  c.supports_deny_all_egress = true;
  c.supports_address_egress_rules = backend_.support().nftables;
  c.supports_domain_allowlist = false;
  c.link_local_blocked = true;
  c.max_timeout_seconds = cfg_.max_timeout_seconds;
  c.images = images_.names();
  return c;
}

whoami control_plane::who() {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<const guest_record*> recs;
  for (const auto& [id, g] : guests_)
    recs.push_back(&g.rec);
  return count_guests(recs);
}

result<control_plane::guest*> control_plane::find(const std::string& id) {
  auto i = guests_.find(id);
  if (i == guests_.end()) return fail(ec::not_found, "no sandbox with id '" + id + "'");
  return &i->second;
}

result<control_plane::guest*> control_plane::find_usable(const std::string& id) {
  auto g = find(id);
  if (!g) return g;
  auto s = (*g)->rec.status;
  if (s == sandbox_status::paused || s == sandbox_status::pausing)
    return fail(ec::paused, "sandbox is paused");
  if (s == sandbox_status::stopped || s == sandbox_status::stopping ||
      s == sandbox_status::starting)
    return fail(ec::transient, "sandbox is " + status_name(s) + " (it was " +
                                   "stopped while this call waited to start it); retry");
  if (s != sandbox_status::running)
    return conflict("sandbox is " + status_name(s) +
                    "; only a running sandbox runs commands "
                    "and serves files");
  return g;
}

result<bool> control_plane::save(const guest& g) {
  return store_.put(g.rec);
}

activity_lease control_plane::lease(guest& g) {
  ++g.busy;
  g.rec.last_used_at = now_rfc3339();
  g.rec.last_used_unix = unix_now();
  return activity_lease{[this, id = g.rec.id] {
    std::lock_guard<std::mutex> lock{mu_};
    if (auto i = guests_.find(id); i != guests_.end()) {
      auto& g = i->second;
      --g.busy;
      g.last_activity = clock::now();
      g.rec.last_used_at = now_rfc3339();
      g.rec.last_used_unix = unix_now();
      // Persistent guests outlive this process: their idle time must too (reap, idle TTL).
      if (g.rec.persistent) save(g);
    }
  }};
}

result<sandbox_created> control_plane::create(const sandbox_create_request& req) {
  // Validate everything first: nothing below may be refused for caller input.
  auto shp = resolve_shape(req.shape);
  if (!shp) return shp.error();
  auto isolation = requested_isolation(req.isolation, backend_.support());
  if (!isolation) return isolation.error();
  auto ingress_secret = req.ingress_enabled ? new_ingress_secret() : std::string{};
  if (needs_rules(req.egress) && !backend_.support().nftables) return rules_unavailable();
  if (!req.persistent && (req.idle_ttl_seconds || req.delete_after_stop_seconds))
    return fail(ec::bad_request, "idle_ttl_seconds and delete_after_stop_seconds apply only "
                                 "to a persistent sandbox (\"persistent\": true)");
  auto mounts = resolve_mounts(req.mounts, mount_roots_from_env());
  if (!mounts) return mounts.error();
  // Persistent guests are built for their caller: their workspace is theirs to keep. Pool
  // guests were built without mounts; the rest of what shapes a guest (isolation too) is
  // the pool's key.
  if (pool_ && !req.persistent && mounts->empty())
    if (auto taken = create_from_pool(req, *shp, *isolation)) return std::move(*taken);

  guest_spec spec;
  spec.id = new_guest_id();
  spec.name = req.name.value_or(spec.id);
  spec.isolation = *isolation;
  spec.shape_info = *shp;
  spec.egress = req.egress;
  spec.envs = req.envs;
  spec.mounts = *mounts;
  spec.reserve_workspace = req.persistent;
  // A named persistent guest of a fleet: its workspace under the shared root, owned here
  // first (a kept one is a takeover: a cold boot from it).
  const auto shared = shared_dir(req);
  if (shared)
    if (auto ok = claim_shared(req, *shared, spec); !ok) return ok.error();
  // A takeover keeps the guest's service URLs: its secret, its old ids as aliases.
  std::vector<std::string> former_ids;
  if (shared && spec.kept_workspace && req.ingress_enabled)
    former_ids = adopt_kept_ingress(*shared, ingress_secret);
  auto release_shared = [&](failure f) -> failure {
    if (shared && cfg_.owners) cfg_.owners->release(*req.name);
    return f;
  };
  // Deleted before this guest is built, or on any way out (never handed out again).
  struct lent_guests {
    warm_pool* pool;
    std::vector<pool_guest> v;
    void release() {
      if (pool && !v.empty()) pool->release(std::move(v));
      v.clear();
    }
    ~lent_guests() { release(); }
  } lent{pool_.get(), {}};
  {
    std::lock_guard<std::mutex> lock{mu_};
    // Resolved under the lock: remove_image() cannot take the image away before this
    // guest's record names it.
    auto image = images_.resolve(req.rootfs);
    if (!image) return release_shared(image.error());
    spec.rootfs = image->name;
    spec.image = image->layout;
    for (const auto& [id, g] : guests_)
      if (is_live(g.rec.status) && g.rec.name == spec.name)
        return conflict("name '" + spec.name + "' is taken by live sandbox " + id +
                        "; choose another name or delete that sandbox");
    // Admitted in the same critical section that records the guest as creating: its
    // record is its reservation, so concurrent creates count each other. Pool guests are
    // capacity on loan: the ones lent here are deleted before this guest is built.
    if (auto full = admit_lending(*shp, lent.v)) return release_shared(*full);
    guest g;
    g.rec.id = spec.id;
    g.rec.name = spec.name;
    g.rec.status = sandbox_status::creating;
    g.rec.shape = shp->id;
    g.rec.rootfs = spec.rootfs;
    g.rec.egress = spec.egress;
    g.rec.envs = spec.envs;
    g.rec.mounts = spec.mounts;
    g.rec.auto_pause_after_seconds = req.auto_pause_after_seconds;
    g.rec.ingress_enabled = req.ingress_enabled;
    g.rec.ingress_secret = ingress_secret;
    g.rec.created_at = now_rfc3339();
    g.rec.persistent = req.persistent;
    if (req.persistent) {
      g.rec.idle_ttl_seconds = req.idle_ttl_seconds.value_or(default_idle_ttl_seconds);
      g.rec.delete_after_stop_seconds =
          req.delete_after_stop_seconds.value_or(default_delete_after_stop_seconds);
    }
    g.rec.runtime.id = spec.id;
    g.rec.runtime.isolation = spec.isolation;
    g.rec.seq = next_seq_++;
    g.path_prepend = image->path_prepend;
    // Persist before building, so a crash mid-create leaves a record reconcile cleans up.
    if (auto ok = save(g); !ok) return ok.error();
    guests_.emplace(spec.id, std::move(g));
  }
  gate_.changed();
  lent.release();

  auto started = std::chrono::steady_clock::now();
  // gVisor: an image's snapshot is restored instead of booting; a fleet's takeover restores
  // the checkpoint its last node wrote beside the shared workspace.
  restored_guest built;
  std::optional<std::vector<std::string>> snapshot_waiter;
  const auto snapshot = images_.snapshot_dir(spec.rootfs);
  if (spec.isolation == guest_isolation::gvisor && !spec.kept_workspace && !snapshot.empty() &&
      has_checkpoint(snapshot)) {
    built = restore_or_boot(backend_, spec, snapshot, "snapshot");
    if (built.started_from == "snapshot") snapshot_waiter = snapshot_environment(snapshot);
  } else if (spec.isolation == guest_isolation::gvisor && spec.kept_workspace &&
             !spec.guest_dir.empty()) {
    built = restore_or_boot(backend_, spec, checkpoint_dir(spec.guest_dir), "checkpoint");
  } else {
    built.rt = backend_.create(spec);
  }
  auto& rt = built.rt;
  auto spawn_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();

  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(spec.id);
  gate_.changed(); // built or not, the reservation is settled
  if (!rt) {
    // The backend removed what it built; forget the guest entirely (no partial guest).
    store_.erase(spec.id);
    guests_.erase(spec.id);
    return release_shared(rt.error());
  }
  g.rec.runtime = *rt;
  g.rec.status = sandbox_status::running;
  if (spec.isolation == guest_isolation::gvisor) {
    g.rec.started_from = built.started_from;
    if (!built.restore_error.empty()) g.rec.restore_error = g.rec.note = built.restore_error;
  }
  g.snapshot_waiter = std::move(snapshot_waiter);
  g.last_activity = clock::now();
  auto ok = save(g);
  if (ok && shared) ok = watch_shared(*rt);
  if (ok && shared) ok = write_shared_spec(req, *shared);
  if (ok && shared && req.ingress_enabled)
    ok = keep_ingress(*shared, ingress_secret, former_ids, spec.id);
  if (!ok) {
    // A kept workspace stays as it was; a new one goes with the guest.
    if (spec.kept_workspace)
      backend_.stop(*rt);
    else
      backend_.destroy(*rt);
    store_.erase(spec.id);
    guests_.erase(spec.id);
    return release_shared(ok.error());
  }
  sandbox_created out;
  out.id = spec.id;
  out.name = spec.name;
  out.ip = rt->ip;
  out.shape = shp->id;
  out.rootfs = spec.rootfs;
  out.vcpu = shp->vcpu;
  out.mem_mib = shp->mem_mib;
  out.disk_mib = shp->default_disk_mib;
  out.spawn_ms = static_cast<uint64_t>(spawn_ms);
  out.egress = spec.egress;
  out.ingress_secret = ingress_secret;
  return out;
}

std::optional<result<sandbox_created>>
control_plane::create_from_pool(const sandbox_create_request& req, const shape& shp,
                                guest_isolation isolation) {
  auto started = std::chrono::steady_clock::now();
  std::string id;
  guest_runtime rt;
  std::filesystem::path snapshot; // the image's, for a gVisor create of a snapshot image
  bool fifo_waiter = false;       // a gVisor pool guest whose python3 waits on its FIFO
  std::string path_prepend;
  // Declared first, so that a waiter not kept is killed and reaped after the lock is let go.
  std::unique_ptr<python_waiter> waiter;
  {
    std::unique_lock<std::mutex> lock{mu_};
    auto image = images_.resolve(req.rootfs);
    if (!image) return result<sandbox_created>{image.error()};
    pool_key key{shp.id, image->name, req.egress, preload_of(*image), isolation};
    pool_->await_build(lock, key, *image); // an empty fork-server pool's clone in flight
    if (req.name)
      for (const auto& [other, g] : guests_)
        if (is_live(g.rec.status) && g.rec.name == *req.name)
          return result<sandbox_created>{
              conflict("name '" + *req.name + "' is taken by live sandbox " + other +
                       "; choose another name or delete that sandbox")};
    // Everything that shapes the guest, as build() gives it to a pool guest.
    // A gVisor create of an image with a snapshot gets a copy restored from it (its preload
    // imported, its python3 waiting): the pool builds its guests so, and one it booted cold
    // (made before the snapshot, or its restore failed) is not taken.
    if (isolation == guest_isolation::gvisor) {
      auto dir = images_.snapshot_dir(image->name);
      if (!dir.empty() && has_checkpoint(dir)) snapshot = dir;
    }
    auto taken = pool_->take(key);
    if (!taken) return std::nullopt;
    if (!snapshot.empty() && taken->rec.started_from != "snapshot") {
      pool_->discard(std::move(taken->rec));
      return std::nullopt;
    }
    // Counted as the pool's until taken: admitted as one more guest now (a fenced or
    // draining node refuses it, and it goes back).
    if (auto full = admit(shp)) {
      pool_->put_back(key, std::move(*taken));
      return result<sandbox_created>{*full};
    }
    auto name = req.name.value_or(taken->rec.id);
    // Parked as creating (exec and files refuse it; its store record still says pooled)
    // while its waiter is checked outside the lock.
    id = taken->rec.id;
    rt = taken->rec.runtime;
    waiter = std::move(taken->waiter);
    guest g;
    g.rec = std::move(taken->rec);
    g.rec.name = name;
    g.rec.status = sandbox_status::creating;
    g.path_prepend = path_prepend = image->path_prepend;
    fifo_waiter = taken->fifo_waiter;
    guests_.emplace(id, std::move(g));
  }
  // take() proved the init alive (its /proc/<pid>/stat) under the lock a moment ago: not
  // read again here. A guest that dies after either look fails its first call anyway.
  bool alive = !(waiter && waiter->exited());
  std::optional<std::vector<std::string>> snapshot_waiter;
  if (!snapshot.empty()) snapshot_waiter = snapshot_environment(snapshot);
  if (fifo_waiter) {
    // Its python3 started with the environment every exec in the guest gets.
    std::map<std::string, std::string> envs;
    if (!path_prepend.empty()) envs["PATH"] = path_prepend + ":" + default_guest_path;
    snapshot_waiter = exec_environment(envs);
  }
  std::lock_guard<std::mutex> lock{mu_};
  gate_.changed();
  auto node = guests_.extract(id);
  auto& g = node.mapped();
  if (!alive) {
    g.rec.status = sandbox_status::running;
    pool_->discard(std::move(g.rec));
    return std::nullopt;
  }
  // The pool's guest becomes the caller's: what the request says about it is applied now
  // (its hostname stays its id: the UTS namespace was made when it was built).
  g.rec.pooled = false;
  g.rec.status = sandbox_status::running;
  g.rec.envs = req.envs;
  g.rec.auto_pause_after_seconds = req.auto_pause_after_seconds;
  g.rec.ingress_enabled = req.ingress_enabled;
  g.rec.ingress_secret = req.ingress_enabled ? new_ingress_secret() : std::string{};
  g.rec.created_at = now_rfc3339();
  g.rec.seq = next_seq_++;
  if (isolation == guest_isolation::gvisor && g.rec.started_from.empty())
    g.rec.started_from = "boot";
  g.snapshot_waiter = std::move(snapshot_waiter);
  g.last_activity = clock::now();
  if (auto ok = save(g); !ok) {
    // The store still says pooled: the filler (or the next start) deletes it.
    g.rec.pooled = true;
    pool_->discard(std::move(g.rec));
    return result<sandbox_created>{ok.error()};
  }
  sandbox_created out;
  out.id = id;
  out.name = g.rec.name;
  out.ip = rt.ip;
  out.shape = shp.id;
  out.rootfs = g.rec.rootfs;
  out.vcpu = shp.vcpu;
  out.mem_mib = shp.mem_mib;
  out.disk_mib = shp.default_disk_mib;
  out.spawn_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                           std::chrono::steady_clock::now() - started)
                                           .count());
  out.egress = g.rec.egress;
  out.ingress_secret = g.rec.ingress_secret;
  g.waiter = std::move(waiter);
  guests_.insert(std::move(node));
  return result<sandbox_created>{std::move(out)};
}

result<noted_view> control_plane::view(const std::string& id) {
  std::lock_guard<std::mutex> lock{mu_};
  auto g = find(id);
  if (!g) return g.error();
  auto v = to_view((*g)->rec);
  v.calls_in_progress = static_cast<uint32_t>((*g)->busy);
  return noted_view{std::move(v), (*g)->rec.note};
}

result<sandbox_list> control_plane::list(const list_query& q) {
  std::lock_guard<std::mutex> lock{mu_};
  std::vector<const guest_record*> recs;
  for (const auto& [id, g] : guests_)
    recs.push_back(&g.rec);
  std::sort(recs.begin(), recs.end(),
            [](const guest_record* a, const guest_record* b) { return a->seq < b->seq; });
  auto page = list_page(recs, q);
  for (auto& v : page.data)
    if (auto i = guests_.find(v.id); i != guests_.end())
      v.calls_in_progress = static_cast<uint32_t>(i->second.busy);
  return page;
}

result<sandbox_deleted> control_plane::destroy(const std::string& id) {
  return destroy_guest(id, std::nullopt);
}

result<sandbox_deleted> control_plane::destroy_if_idle(const std::string& id,
                                                       uint32_t idle_seconds) {
  return destroy_guest(id, idle_seconds);
}

result<sandbox_deleted> control_plane::destroy_guest(const std::string& id,
                                                     std::optional<uint32_t> if_idle) {
  guest_runtime rt;
  std::unique_ptr<python_waiter> waiter; // reaped once destroy() killed it
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find(id);
    if (!g) return g.error();
    auto& rec = (*g)->rec;
    if (if_idle && is_live(rec.status)) {
      if ((*g)->busy > 0)
        return conflict("sandbox in use: " + std::to_string((*g)->busy) +
                        " exec/file call(s) in progress");
      // The shorter of the two: this process's own clock starts at its start, so a guest
      // adopted after a restart counts as just used until its recorded use says otherwise.
      auto idle = static_cast<int64_t>(
          std::chrono::duration<double>(clock::now() - (*g)->last_activity).count());
      if (rec.last_used_unix > 0) idle = std::min(idle, unix_now() - rec.last_used_unix);
      if (idle < int64_t{*if_idle})
        return conflict("sandbox in use: last used " + std::to_string(idle) +
                        " s ago, less than " + std::to_string(*if_idle) + " s");
    }
    switch (rec.status) {
    case sandbox_status::destroyed:
    case sandbox_status::failed: // reconcile already removed its leftovers
      return sandbox_deleted{id, sandbox_status::destroyed};
    case sandbox_status::destroying:
      return sandbox_deleted{id, sandbox_status::destroying};
    case sandbox_status::creating:
    case sandbox_status::pausing:
    case sandbox_status::resuming:
    case sandbox_status::stopping:
    case sandbox_status::starting:
      return conflict("sandbox is " + status_name(rec.status) + "; retry the delete");
    default:
      break;
    }
    rec.status = sandbox_status::destroying;
    if (auto ok = save(**g); !ok) return ok.error();
    rt = rec.runtime;
    waiter = std::move((*g)->waiter);
  }
  auto done = backend_.destroy(rt);
  waiter.reset();
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(id);
  g.rec.status = done ? sandbox_status::destroyed : sandbox_status::error;
  if (done) g.rec.ended_at = unix_now();
  if (!done) g.rec.note = "destroy failed: " + done.error().message;
  gate_.changed();
  if (auto ok = save(g); !ok) return ok.error();
  if (!done)
    return fail(ec::unavailable, "destroy of " + id + " failed (" + done.error().message +
                                     "); retry the delete");
  if (cfg_.owners && g.rec.persistent && !cfg_.workspace_root.empty() &&
      rt.workspace.parent_path().parent_path() == cfg_.workspace_root)
    cfg_.owners->release(g.rec.name); // its workspace went with it: nothing left to own
  return sandbox_deleted{id, sandbox_status::destroyed};
}

result<sandbox_view> control_plane::pause(const std::string& id) {
  return pause_guest(id, false);
}

result<sandbox_view> control_plane::pause_guest(const std::string& id, bool only_if_idle) {
  return transition(
      id, {sandbox_status::running, sandbox_status::pausing, sandbox_status::paused},
      only_if_idle, [this](const guest_runtime& rt) { return backend_.pause(rt); },
      [](guest& g) { g.rec.paused_at = now_rfc3339(); });
}

result<sandbox_view> control_plane::resume(const std::string& id) {
  return transition(
      id, {sandbox_status::paused, sandbox_status::resuming, sandbox_status::running}, false,
      [this](const guest_runtime& rt) { return backend_.resume(rt); },
      [](guest& g) {
        g.rec.last_resumed_at = now_rfc3339();
        g.last_activity = clock::now();
      });
}

result<sandbox_view>
control_plane::transition(const std::string& id, const steps& s, bool only_if_idle,
                          const std::function<result<bool>(const guest_runtime&)>& op,
                          const std::function<void(guest&)>& arrived) {
  guest_runtime rt;
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find(id);
    if (!g) return g.error();
    auto& rec = (*g)->rec;
    if (rec.status == s.to) return to_view(rec); // idempotent
    if (rec.status != s.from)
      return conflict("sandbox is " + status_name(rec.status) + "; only a " +
                      status_name(s.from) + " sandbox can become " + status_name(s.to));
    if (only_if_idle && (*g)->busy > 0) return conflict("sandbox is busy");
    rec.status = s.via;
    rt = rec.runtime;
  }
  auto done = op(rt);
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(id);
  if (!done) {
    g.rec.status = s.from;
    return done.error();
  }
  g.rec.status = s.to;
  arrived(g);
  if (auto ok = save(g); !ok) return ok.error();
  return to_view(g.rec);
}

result<egress_body> control_plane::egress(const std::string& id) {
  std::lock_guard<std::mutex> lock{mu_};
  auto g = find(id);
  if (!g) return g.error();
  return egress_body{(*g)->rec.egress};
}

result<egress_body> control_plane::set_egress(const std::string& id, const egress_policy& p) {
  if (needs_rules(p) && !backend_.support().nftables) return rules_unavailable();
  guest_runtime rt;
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find(id);
    if (!g) return g.error();
    auto s = (*g)->rec.status;
    if (s != sandbox_status::running && s != sandbox_status::paused)
      return conflict("sandbox is " + status_name(s) +
                      "; egress can change only on a running "
                      "or paused sandbox");
    rt = (*g)->rec.runtime;
  }
  auto done = backend_.set_egress(rt, p);
  if (!done) return done.error();
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(id);
  g.rec.egress = p;
  if (auto ok = save(g); !ok) return ok.error();
  return egress_body{p};
}

result<std::unique_ptr<running_exec>> control_plane::start_exec(const std::string& id,
                                                                const exec_request& req) {
  guest_runtime rt;
  std::map<std::string, std::string> envs;
  uint64_t mem_mib = 0;
  activity_lease busy;
  std::unique_ptr<python_waiter> waiter;
  std::optional<std::string> request, relay;
  bool dismiss = false;
  if (auto woken = wake(id); !woken) return woken.error();
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find_usable(id);
    if (!g) return g.error();
    rt = (*g)->rec.runtime;
    envs = (*g)->rec.envs;
    if (!(*g)->path_prepend.empty() && !envs.count("PATH"))
      envs["PATH"] = (*g)->path_prepend + ":" + default_guest_path;
    if (auto s = find_shape((*g)->rec.shape)) mem_mib = s->mem_mib;
    busy = lease(**g);
    // Only the first exec can meet the waiter. One it will not serve kills it here, under
    // the mutex (a SIGKILL and a reap of a process blocked in open()), so that no exec
    // racing this one can start while it is still there.
    if (auto& w = (*g)->waiter) {
      request = python_waiter::request_for(req, exec_environment(envs), w->environment());
      if (request)
        waiter = std::move(w);
      else
        w.reset();
    }
    // A snapshot's python3 likewise: it serves a first `python3 …` through the relay; any
    // other first exec ends it first, so nobody meets a process they did not start.
    if (auto& sw = (*g)->snapshot_waiter) {
      relay = python_waiter::request_for(req, exec_environment(envs), *sw);
      dismiss = !relay;
      sw.reset();
    }
  }
  if (dismiss)
    if (auto d = backend_.start_exec(rt, snapshot_dismiss(), envs)) backend_.reap(*d);
  auto oom_before = backend_.oom_kills(rt);
  auto command = [&](exec_process p) {
    return std::unique_ptr<running_exec>{new guest_command(
        backend_, rt, p, std::move(busy), oom_before, mem_mib,
        [this, id](std::string note) { record_note(id, std::move(note)); },
        [this, id](std::string why) { return workspace_lost(id, why); })};
  };
  if (waiter) {
    if (auto p = waiter->serve(*request)) return command(*p);
    // Not listening (it died, or was not ready): killed and reaped before the command starts.
    waiter.reset();
  }
  auto p = backend_.start_exec(rt, relay ? snapshot_relay(*relay) : req, envs);
  if (!p) return p.error();
  return command(*p);
}

result<guest_file> control_plane::open_file(const std::string& id, const std::string& path,
                                            bool for_write) {
  return open_guest_file(id, path, for_write, std::nullopt);
}

result<guest_file> control_plane::open_file_with_room(const std::string& id,
                                                      const std::string& path, uint64_t bytes) {
  return open_guest_file(id, path, true, bytes);
}

result<guest_file> control_plane::open_guest_file(const std::string& id,
                                                  const std::string& path, bool for_write,
                                                  std::optional<uint64_t> room) {
  guest_runtime rt;
  activity_lease busy;
  if (auto woken = wake(id); !woken) return woken.error();
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find_usable(id);
    if (!g) return g.error();
    rt = (*g)->rec.runtime;
    busy = lease(**g);
  }
  auto fd = backend_.open_file(rt, path, for_write, room);
  if (!fd) return fd.error();
  return guest_file{unique_fd{*fd}, std::move(busy)};
}

result<bool> control_plane::check_upload_room(const std::string& id, const std::string& path,
                                              uint64_t bytes) {
  guest_runtime rt;
  if (auto woken = wake(id); !woken) return woken.error();
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find_usable(id);
    if (!g) return g.error();
    rt = (*g)->rec.runtime;
  }
  return backend_.check_room(rt, path, bytes);
}

void control_plane::record_note(const std::string& id, std::string note) {
  std::lock_guard<std::mutex> lock{mu_};
  if (auto i = guests_.find(id); i != guests_.end()) {
    i->second.rec.note = std::move(note);
    save(i->second);
  }
}

std::string control_plane::workspace_lost(const std::string& id, const std::string& why) {
  guest_runtime rt;
  std::unique_ptr<python_waiter> waiter; // reaped once destroy() killed it
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto i = guests_.find(id);
    if (i == guests_.end()) return why;
    auto& rec = i->second.rec;
    rec.note = why;
    // A persistent guest's blocks are reserved (a full disk cannot drop its writes): an
    // error there is the disk's own, and its kept image is its owner's to check.
    if (rec.persistent || rec.status != sandbox_status::running) {
      save(i->second);
      return why;
    }
    rec.status = sandbox_status::destroying;
    save(i->second);
    rt = rec.runtime;
    waiter = std::move(i->second.waiter);
  }
  auto done = backend_.destroy(rt); // its image goes too: the space returns to the host
  waiter.reset();
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(id);
  g.rec.status = done ? sandbox_status::failed : sandbox_status::error;
  g.rec.ended_at = unix_now();
  if (!done) g.rec.note = why + "; destroy failed: " + done.error().message;
  gate_.changed();
  save(g);
  return why + "; the sandbox is destroyed and marked failed";
}

void control_plane::pause_idle() {
  std::vector<std::string> due;
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto now = clock::now();
    for (const auto& [id, g] : guests_) {
      if (g.rec.status != sandbox_status::running || !g.rec.auto_pause_after_seconds ||
          g.busy > 0)
        continue;
      auto idle = std::chrono::duration<double>(now - g.last_activity).count();
      if (idle >= *g.rec.auto_pause_after_seconds * cfg_.auto_pause_scale) due.push_back(id);
    }
  }
  for (const auto& id : due)
    pause_guest(id, true);
  stop_idle();
}

} // namespace guestflow::local

namespace guestflow::local {

result<image_list> control_plane::images() {
  return images_.list();
}

result<image_added> control_plane::add_image(const image_add_request& req) {
  auto added = images_.add(req);
  if (!added || !req.snapshot) return added;
  // The snapshot is part of the add: an image whose snapshot cannot be made is removed again.
  if (auto ok = make_snapshot(req.name); !ok) {
    remove_image(req.name);
    return ok.error();
  }
  added->image.snapshot = true;
  return added;
}

result<image_removed> control_plane::remove_image(const std::string& name) {
  std::filesystem::path detached;
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (name != builtin_image) {
      if (pool_ && pool_->uses_image(name))
        return conflict("image in use: '" + name +
                        "' is kept warm by this control plane's warm pool (--warm-pool / "
                        "GUESTFLOW_WARM_POOL); restart it without that pool first");
      std::string users;
      size_t n = 0;
      for (const auto& [id, g] : guests_) {
        auto st = g.rec.status;
        if (g.rec.rootfs != name || st == sandbox_status::destroyed ||
            st == sandbox_status::failed)
          continue;
        users += std::string{n++ ? ", " : ""} + id +
                 (g.rec.name != id ? " (" + g.rec.name + ", " : " (") + status_name(st) + ")";
      }
      if (n > 0)
        return conflict("image in use: '" + name + "' is the rootfs of " + std::to_string(n) +
                        " sandbox" + (n > 1 ? "es" : "") + " not yet deleted: " + users +
                        "; delete them first");
    }
    auto d = images_.detach(name);
    if (!d) return d.error();
    detached = std::move(*d);
  }
  images_.purge(detached);
  return image_removed{name};
}

} // namespace guestflow::local
