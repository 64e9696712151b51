#pragma once

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/images/image_store.hpp"
#include "controlplane/local/service/capacity.hpp"
#include "controlplane/local/service/guest_owners.hpp"
#include "controlplane/local/service/sandbox_service.hpp"
#include "controlplane/local/service/warm_pool.hpp"
#include "controlplane/local/store/guest_record.hpp"
#include "controlplane/local/store/record_store.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace guestflow::local {

/// A persistent guest's defaults (LangSmith's): stopped after 10 minutes idle, deleted after
/// 14 days stopped.
inline constexpr uint32_t default_idle_ttl_seconds = 600;
inline constexpr uint32_t default_delete_after_stop_seconds = 14 * 24 * 3600;

struct control_plane_config {
  /// Multiplies every auto_pause_after_seconds and idle_ttl_seconds (test-only: 0.01 makes
  /// 60 s into 0.6 s); delete_after_stop_seconds is never scaled.
  double auto_pause_scale = 1.0;
  /// Reported in capabilities: the longest `timeout N` the runtime should wrap a command in.
  uint32_t max_timeout_seconds = 3600;
  /// Guests kept built and never used, per (shape, image); empty: no pool. Every image it
  /// names must exist (serve.cpp checks at start).
  warm_pool_spec warm_pool;
  /// Where the pool reports failed creates and deletes.
  std::function<void(const std::string&)> warn;
  /// A python waiter in every pool guest (python_waiter.hpp); GUESTFLOW_POOL_PYTHON=0 in
  /// the environment turns it off too.
  bool pool_python = true;
  /// The node's name in /v1/capacity and the fleet; empty: host_node_name().
  std::string node;
  /// What the guests may commit (`--memory-budget-mb`; 0: default_memory_budget_mib(),
  /// which serve.cpp resolves at start) and how many there may be (`--max-guests`).
  capacity_limits capacity;
  /// How long the records of destroyed and failed guests are kept before they are pruned
  /// (`--destroyed-retention-hours`): every list and sweep walks them until then.
  std::chrono::seconds destroyed_retention{24 * 3600};
  /// `--workspace-root`: a named persistent guest's directory (workspace image and
  /// shared_spec_file) is workspace_root/<name>, so that another node can take it over.
  /// Empty: every workspace stays under the state dir.
  std::filesystem::path workspace_root;
  /// With a fleet: who owns the guests under workspace_root (null: this node alone).
  std::shared_ptr<guest_owners> owners;
  /// The shared guests' watchdog also kills them once this process has been stopped
  /// (SIGSTOP: hung, renewing no lease) this long; 0: only at its death. serve sets a third
  /// of the fleet's TTL: the lease may expire ⅔ TTL after its last renewal.
  std::chrono::milliseconds hang_limit{0};
};

/// The real domain: guest records (write-through to the record store) and the backend
/// that builds the guests. Thread-safe: one mutex guards the records; backend calls run
/// outside it, with the guest parked in a transitional status (creating, pausing,
/// resuming, destroying) so that concurrent calls see a consistent state.
class control_plane final : public sandbox_service {
public:
  /// `records` are the store's contents after reconcile(); `pooled` the warm-pool guests it
  /// found alive (kept while cfg.warm_pool wants them, deleted otherwise).
  control_plane(guest_backend& backend, record_store& store, image_store& images,
                control_plane_config cfg, std::vector<guest_record> records,
                std::vector<guest_record> pooled = {});
  /// Stops the warm pool and deletes its guests.
  ~control_plane() override;

  shape_list shapes() override;
  capabilities caps() override;
  whoami who() override;
  result<sandbox_created> create(const sandbox_create_request& req) override;
  result<noted_view> view(const std::string& id) override;
  result<sandbox_list> list(const list_query& q) override;
  result<sandbox_deleted> destroy(const std::string& id) override;
  result<sandbox_deleted> destroy_if_idle(const std::string& id,
                                          uint32_t idle_seconds) override;
  result<sandbox_view> pause(const std::string& id) override;
  result<sandbox_view> resume(const std::string& id) override;
  result<sandbox_view> stop(const std::string& id) override;
  result<sandbox_view> start(const std::string& id) override;
  result<egress_body> egress(const std::string& id) override;
  result<egress_body> set_egress(const std::string& id, const egress_policy& p) override;
  result<std::unique_ptr<running_exec>> start_exec(const std::string& id,
                                                   const exec_request& req) override;
  result<guest_file> open_file(const std::string& id, const std::string& path,
                               bool for_write) override;
  result<guest_file> open_file_with_room(const std::string& id, const std::string& path,
                                         uint64_t bytes) override;
  result<bool> check_upload_room(const std::string& id, const std::string& path,
                                 uint64_t bytes) override;
  /// control_plane_ingress.cpp
  result<ingress_target> open_ingress(const std::string& id,
                                      const std::optional<std::string>& token) override;
  std::optional<ingress_pass> ingress_ready(const std::string& id,
                                            const std::optional<std::string>& token) override;
  void pause_idle() override;
  result<image_list> images() override;
  result<image_added> add_image(const image_add_request& req) override;
  /// Refused (409, "image in use: …" naming them) while a guest that is not destroyed or
  /// failed has it as its rootfs; a create cannot name it once this has begun.
  result<image_removed> remove_image(const std::string& name) override;
  std::vector<pool_status> pool() override;
  result<capacity_status> capacity() override;
  result<capacity_status> drain(bool on) override;

  /// The admission gate: the fleet registrar fences the node through it and waits on its
  /// changes to refresh the node's record.
  capacity_gate& gate() noexcept { return gate_; }

  /// Forgets the records of guests destroyed or failed longer than the retention ago (in
  /// the store too); returns how many. Called periodically by the server.
  size_t prune_destroyed();

  /// Stops the warm pool's filler (an in-flight create finishes) and deletes every pool
  /// guest; returns how many. Idempotent; creates afterwards build their guests.
  size_t stop_pool();

  /// The first step of a stop: the warm pool's filler starts no create after it (one in
  /// flight finishes; stop_pool deletes it). Returns at once; safe from any thread.
  void halt_pool();

  // -- shared workspaces (control_plane_fleet.cpp) --
  /// The node is fenced (its lease may expire: another node may take its guests over):
  /// every running persistent guest under the workspace root is stopped. Blocking.
  void stop_shared();
  /// The node is registered again: its guests under the workspace root that another node
  /// now owns are forgotten (processes killed, local leftovers removed, record destroyed,
  /// the shared workspace untouched). Blocking (etcd).
  void forget_taken_over();

private:
  /// open_file, after check_upload_room's check of `room` bytes when given: one wake, one
  /// lookup and one proven guest root for both.
  result<guest_file> open_guest_file(const std::string& id, const std::string& path,
                                     bool for_write, std::optional<uint64_t> room);
  /// Shared guests die with this process, however it ends (SIGKILL included): another node
  /// takes one over only after this node's lease expired, so a guest outliving its control
  /// plane would write its workspace beside the new owner's. A watchdog (`sh`, its own
  /// session) reads the cgroup directories of every shared guest this process ran from a
  /// socket only this process holds; at EOF — this process gone — it kills them all (a
  /// stopped or deleted guest's directories are gone, and killing them is a no-op).
  struct death_watch {
    pid_t pid = -1;
    unique_fd socket; ///< the server's end (close-on-exec: never inherited)
  };
  /// Tells the watchdog `rt`'s cgroups (mutex held; starts one — told every running shared
  /// guest — when there is none or it died). A failure: the guest must not run.
  result<bool> watch_shared(const guest_runtime& rt);
  /// Ends the watchdog: it kills what it was told of (shared guests still running), exits
  /// and is reaped (bounded).
  void end_watch();

  using clock = std::chrono::steady_clock;

  struct guest {
    guest_record rec;
    int busy = 0; ///< exec / file calls in progress
    clock::time_point last_activity = clock::now();
    std::string path_prepend; ///< its image's, first on every command's PATH
    /// From the pool, until the first exec: serves it, or is killed before it runs.
    std::unique_ptr<python_waiter> waiter;
    /// Restored from its image's gVisor snapshot: the snapshot's python3 waits in it for the
    /// first exec (this is its start-up environment); gone once an exec met it.
    std::optional<std::vector<std::string>> snapshot_waiter;
  };

  /// Finds a guest by id (mutex held), or a 404 failure.
  result<guest*> find(const std::string& id);
  /// Finds a guest that can run code now (mutex held): 404, 409 paused, 409 not running.
  result<guest*> find_usable(const std::string& id);
  /// Persists `g` (mutex held).
  result<bool> save(const guest& g);
  /// Counts an exec / file call on `g` (mutex held): busy, last used; the lease ends it.
  activity_lease lease(guest& g);
  result<sandbox_view> pause_guest(const std::string& id, bool only_if_idle);
  /// destroy(), refused when `if_idle` is set and the guest has a call in progress or was
  /// used less than that many seconds ago (see destroy_if_idle).
  result<sandbox_deleted> destroy_guest(const std::string& id, std::optional<uint32_t> if_idle);

  // -- persistent guests (control_plane_lifecycle.cpp) --
  /// running / paused → stopping → stopped; `note` says why (idle TTL). only_if_idle: not
  /// while a call is in progress.
  result<sandbox_view> stop_guest(const std::string& id, bool only_if_idle,
                                  const std::string& note);
  /// stopped → starting (mutex held): admitted by the gate, the spec to build from the kept
  /// workspace.
  result<guest_spec> begin_start(guest& g);
  /// Builds `spec` (mutex free), then running, or back to stopped with the failure noted.
  result<sandbox_view> finish_start(const guest_spec& spec);

  // -- gVisor snapshots of images (control_plane_snapshot.cpp) --
  /// Boots a gVisor guest of `image`, imports its preload in the snapshot's python3 and
  /// checkpoints the sandbox into the image's snapshot directory; the guest is deleted.
  result<bool> make_snapshot(const std::string& image);
  /// The snapshot python3's start-up environment (written beside the snapshot), or nullopt.
  static std::optional<std::vector<std::string>>
  snapshot_environment(const std::filesystem::path& snapshot);
  /// Before an exec or file call: a stopped guest is started (wake on use), one stopping or
  /// starting waited for. Nothing for any other guest.
  result<bool> wake(const std::string& id);
  /// Idle persistent guests stopped, long-stopped ones deleted (pause_idle's second half).
  void stop_idle();

  // -- shared workspaces (control_plane_fleet.cpp) --
  /// `req` makes a guest under the workspace root: its directory there, or nullopt.
  std::optional<std::filesystem::path> shared_dir(const sandbox_create_request& req) const;
  /// Before building a guest in `dir` (mutex free): ownership taken; `spec` becomes a cold
  /// boot from the kept workspace when the directory holds a spec (a takeover).
  result<bool> claim_shared(const sandbox_create_request& req, const std::filesystem::path& dir,
                            guest_spec& spec);
  /// After the guest was built: the create request written beside its workspace.
  result<bool> write_shared_spec(const sandbox_create_request& req,
                                 const std::filesystem::path& dir);
  /// Before a start of `spec` (mutex free): false with the owner's name when another node
  /// owns it (the guest is then forgotten here).
  result<bool> may_start(const guest_spec& spec);
  /// Forgets a guest another node owns (mutex held): record destroyed, local leftovers gone.
  void forget(guest& g, const std::string& owner);

  // -- service URLs across a takeover (control_plane_ingress.cpp) --
  /// A takeover of a guest with service URLs (its kept workspace in `dir`) keeps them: the
  /// ingress secret its last node wrote beside the workspace replaces `secret`, and the ids
  /// it had are returned (its old URLs name them). Nothing for a new guest.
  std::vector<std::string> adopt_kept_ingress(const std::filesystem::path& dir,
                                              std::string& secret);
  /// After a shared guest with service URLs was built (mutex held): its secret and every id
  /// it had (`former` and `id`) written beside its workspace for the next owner, and the
  /// former ids made aliases of `id` here.
  result<bool> keep_ingress(const std::filesystem::path& dir, const std::string& secret,
                            const std::vector<std::string>& former, const std::string& id);
  /// The guest a former id names (an alias kept by a takeover), or `id` itself (mutex held).
  const std::string& ingress_id(const std::string& id) const;
  /// ingress_id() once the aliases were rebuilt for `id` from the files beside the live
  /// shared guests' workspaces (this node restarted since the takeover); mutex free, reads
  /// files.
  std::string find_ingress_alias(const std::string& id);
  /// A gVisor guest's service-URL relay to its 127.0.0.1:port (ingress_target::relay).
  result<ingress_relay> start_relay(const guest_runtime& rt, uint16_t port);

  /// A status change through a transitional status: `from` → `via` (mutex held), the
  /// backend `op` (mutex free), then `to` and `arrived` — or back to `from` on failure.
  struct steps {
    sandbox_status from, via, to;
  };
  result<sandbox_view> transition(const std::string& id, const steps& s, bool only_if_idle,
                                  const std::function<result<bool>(const guest_runtime&)>& op,
                                  const std::function<void(guest&)>& arrived);
  void record_note(const std::string& id, std::string note);
  /// A disposable guest whose workspace lost writes (sync_workspace): destroyed, its record
  /// `failed` with `why` as its note, so that no later call reads what was lost. Returns
  /// the exec's error (`why` and what became of the guest).
  std::string workspace_lost(const std::string& id, const std::string& why);
  /// A create served by a pool guest of its isolation, or nullopt when no pool guest
  /// matches (or the one taken had died: it is discarded and the caller builds a guest).
  std::optional<result<sandbox_created>> create_from_pool(const sandbox_create_request& req,
                                                          const shape& shp,
                                                          guest_isolation isolation);
  /// What the guests commit now (mutex held): every guest not destroyed or failed — a
  /// creating one has its shape reserved, and one whose destroy failed (error) may still
  /// hold its memory — plus what the warm pool holds (ready and being built).
  capacity_usage usage();
  /// usage() without the warm pool (mutex held).
  capacity_usage guest_usage();
  /// The gate's verdict for one more guest of `shp` (mutex held).
  std::optional<failure> admit(const shape& shp);
  /// admit(), and when the node is full, pool guests lent to this create (warm_pool::lend)
  /// if that makes room: `victims` are the caller's to release() before it builds.
  std::optional<failure> admit_lending(const shape& shp, std::vector<pool_guest>& victims);

  guest_backend& backend_;
  record_store& store_;
  image_store& images_;
  control_plane_config cfg_;
  std::mutex mu_;
  std::condition_variable settled_; ///< a stopping or starting guest arrived (under mu_)
  std::map<std::string, guest> guests_;
  /// A taken-over guest's former ids → its id here (keep_ingress): its old service URLs.
  std::map<std::string, std::string> ingress_aliases_;
  int64_t next_seq_ = 1;
  std::unique_ptr<warm_pool> pool_; ///< null without targets or adopted pool guests
  death_watch watch_;               ///< with a workspace root only
  capacity_gate gate_;
};

} // namespace guestflow::local
