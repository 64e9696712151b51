#pragma once

#include "controlplane/local/guests/fork_template.hpp"
#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/images/image_store.hpp"
#include "controlplane/local/service/capacity.hpp"
#include "controlplane/local/service/python_waiter.hpp"
#include "controlplane/local/service/warm_pool_spec.hpp"
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
#include <thread>
#include <vector>

namespace guestflow::local {

/// A pool guest: its record, and its python waiter (null when the pool runs none, or it
/// could not start one).
struct pool_guest {
  guest_record rec;
  std::unique_ptr<python_waiter> waiter;
  /// gVisor: a python3 of its image's preload waits on the guest's FIFO
  /// (gvisor_checkpoint.hpp's detached_snapshot_waiter), served through the relay.
  bool fifo_waiter = false;
};

/// What a pool guest of `image` preloads, as pool_key::preload spells it: the image's
/// declared preload, comma-joined ("" = nothing).
std::string preload_of(const resolved_image& image);

/// Guests built ahead of demand and never used, per pool_key (shape, image, egress,
/// preload): each built exactly as a create of that key builds its guest (a netns and its
/// nftables rules when it has egress). A create that matches takes one (take()); builders
/// (several threads, bounded by the cores) build replacements while a pool is below its
/// target, which follows demand between the pool's floor and cap.
///
/// Capacity on loan: pool guests count as what they hold (ready and being built), the
/// builders build only while the node has room (settings::room), and a create that needs
/// room evicts pool guests (lend()) before it is refused, so a pool never turns a run away.
///
/// Pool guests are records in the owner's store marked `pooled`, so that a restart knows
/// them (reconcile hands the live ones back; the pool keeps what its caps allow and
/// deletes the rest). They are never in the owner's guest map: nothing that looks guests up
/// by id — exec, files, get, list, delete — can reach one before it is taken.
///
/// Locking: the owner's records mutex guards the pool's state and serializes the store
/// (record_store is not thread-safe). Calls marked "(mutex held)" expect the caller to hold
/// it; the builders take it themselves and never hold it across a backend call.
class warm_pool {
public:
  struct settings {
    warm_pool_spec targets;
    /// Delay after the first failed create of a pool; doubles per failure up to `max_backoff`.
    std::chrono::milliseconds first_backoff{250};
    std::chrono::milliseconds max_backoff{30'000};
    /// Where the pool reports failed creates and deletes (the control plane's log).
    std::function<void(const std::string&)> warn;
    /// Start a python waiter (python_waiter.hpp) in every pool guest.
    bool python_waiter = true;
    /// Builder threads; 0: the cores, at most max_builders.
    uint32_t builders = 0;
    /// (mutex held) Whether the node has room for one more guest of `s`, the pool holding
    /// `pool` (its ready and building guests) — the owner's capacity gate. Unset: always.
    std::function<bool(const shape& s, const capacity_usage& pool)> room;
    /// How far back takes and misses count as demand.
    std::chrono::milliseconds demand_window{20'000};
    /// Fork-server pools (on unless GUESTFLOW_FORK_POOL=0): a namespaces, deny-all pool whose
    /// image has no root of its own builds its guests as clones of a template that imported
    /// the image's preload (if any) once (guests/fork_template.hpp), each guest's init its
    /// waiter. A template that cannot be made, or dies, makes its pool build ordinary guests
    /// from then on (said once).
    bool fork_server = fork_pool_wanted();
  };

  /// False when GUESTFLOW_FORK_POOL=0.
  static bool fork_pool_wanted();

  static constexpr uint32_t max_builders = 4;

  /// `adopted`: pool guests reconcile found alive; waiters a previous server started in them
  /// are killed, and new ones started. Starts the builders.
  warm_pool(guest_backend& backend, record_store& store, image_store& images, std::mutex& mu,
            settings s, std::vector<guest_record> adopted);
  ~warm_pool();
  warm_pool(const warm_pool&) = delete;
  warm_pool& operator=(const warm_pool&) = delete;

  /// (mutex held) A ready guest of `key`, out of the pool, or nullopt (a miss, counted as
  /// demand when a pool has that key). Its record in the store still says pooled until the
  /// caller saves it as the new owner's guest, so a crash in between hands it back to the
  /// pool instead of leaking it. Wakes a builder.
  std::optional<pool_guest> take(const pool_key& key);

  /// (mutex held, as `lock`) When `key`'s pool builds clones (a fork-server pool) of an
  /// image with a preload and is empty with a build in flight or due, waits for it, the mutex
  /// let go meanwhile, until a guest is ready, none is coming, the pool stops, or a second has
  /// passed. A clone is made in tens of milliseconds; a create that missed builds its guest
  /// cold instead, whose run imports the engine again on the same CPUs (~0.8 s of CPU for
  /// flowpool's engine).
  void await_build(std::unique_lock<std::mutex>& lock, const pool_key& key,
                   const resolved_image& image);

  /// (mutex held) A guest take() gave that the caller may not use after all (its create
  /// was refused): back at the front of its pool, the take uncounted.
  void put_back(const pool_key& key, pool_guest g);

  /// (mutex held) A taken guest the caller could not use (its init died): deleted by a
  /// builder, never handed out again.
  void discard(guest_record r);

  /// (mutex held) Capacity on loan: when freeing pool guests lets a create fit —
  /// `fits(freed)` says whether it does with `freed` given back — the fewest that do,
  /// least recently useful pool first (the longest since a take or miss), ready ones before
  /// builds in flight (a doomed build is deleted when it ends). The ready ones are returned
  /// for the caller to delete (release()) before it builds; none when even all would not do.
  std::vector<pool_guest> lend(const std::function<bool(const capacity_usage& freed)>& fits);

  /// Deletes guests lend() gave (call without the mutex; it takes it).
  void release(std::vector<pool_guest> victims);

  /// (mutex held) What the pool holds now: its ready guests and its builds in flight (but
  /// doomed ones), as memory and guests.
  capacity_usage held() const;

  /// (mutex held) Per pool: every target, and any pool still holding guests.
  std::vector<pool_status> status() const;

  /// (mutex held) Whether a target names `image` or a pool guest (ready or being built)
  /// has it as its rootfs.
  bool uses_image(const std::string& image) const;

  /// Stops the builders (creates in flight finish first) and deletes every pool guest.
  /// Returns how many were deleted. Idempotent; call without the mutex.
  size_t stop();

  /// Tells the builders to build nothing more and returns at once (call without the
  /// mutex): a server's stop does this first, so that a stop waiting on other work (calls
  /// in flight, a fenced node's shared guests) does not go on filling the pool meanwhile.
  void halt();

private:
  using clock = std::chrono::steady_clock;
  /// One pool's state (every key a target names or a guest holds).
  struct pool {
    std::vector<pool_guest> ready;
    uint32_t creating = 0;
    uint32_t doomed = 0; ///< builds in flight lent to creates: deleted when they end
    uint32_t floor = 0, cap = 0;
    uint32_t failures = 0; ///< creates failed in a row (backoff)
    clock::time_point backoff_until{};
    std::vector<clock::time_point> demand; ///< takes and misses within the window
    clock::time_point last_demand{};
    std::chrono::milliseconds fill_estimate{1000}; ///< moving average of build times
    uint64_t takes = 0, misses = 0, evicted = 0, fills = 0, fill_ms = 0;
  };

  void fill();
  /// (mutex held) A guest to delete now (discarded, or beyond its pool's target while no
  /// demand keeps it), marked destroying and persisted; nullopt when none.
  std::optional<pool_guest> next_to_delete(clock::time_point now);
  /// (mutex held) A pool below target whose backoff has passed and that has room. `blocked`
  /// is set when one is below target but the node has no room.
  std::optional<pool_key> next_to_build(clock::time_point now, bool& blocked);
  /// (mutex held) What `p` aims at now: demand over the window times the fill time, with
  /// a margin, within floor..cap (the floor with no demand).
  uint32_t target_of(const pool& p, clock::time_point now) const;
  /// (mutex held) Records a take or miss of `p` at `now`.
  void demand(pool& p, clock::time_point now);
  /// Builds one guest of `key` (takes and releases `lock` around the backend call).
  void build(std::unique_lock<std::mutex>& lock, const pool_key& key);
  /// Deletes `r` (mutex free), then erases its record (mutex taken); false on failure.
  bool delete_guest(std::unique_lock<std::mutex>& lock, pool_guest g);
  /// A waiter for `rt` (its image's PATH first, its preload imported), or null (off, or it
  /// failed: warned). Mutex free.
  std::unique_ptr<python_waiter> start_waiter(const guest_runtime& rt,
                                              const resolved_image* image);
  void failed(const pool_key& key, const std::string& why);

  /// A fork-server pool's template, started by the first build of its key.
  struct fork_slot {
    std::shared_ptr<fork_template> tpl;
    bool broken = false; ///< no template (or it died): ordinary guests, said once
  };
  /// Whether `key`'s guests may be clones (settings::fork_server).
  bool forkable(const pool_key& key, const resolved_image& image) const;
  /// `key`'s live template, started on first use; null: build an ordinary guest. Mutex free.
  std::shared_ptr<fork_template> template_for(const pool_key& key, const resolved_image& image,
                                              const guest_spec& spec,
                                              const std::vector<std::string>& env);

  std::mutex templates_mu_; ///< held while a template starts (other builders wait)
  std::map<pool_key, fork_slot> templates_;

  guest_backend& backend_;
  record_store& store_;
  image_store& images_;
  std::mutex& mu_;
  settings settings_;
  std::map<pool_key, pool> pools_;
  std::vector<pool_guest> discarded_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::condition_variable wake_;
  std::condition_variable built_; ///< a build ended (await_build)
  std::vector<std::thread> builders_;
};

} // namespace guestflow::local
