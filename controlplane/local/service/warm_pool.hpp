#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/images/image_store.hpp"
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
};

/// Guests built ahead of demand and never used, per (shape, image); every one deny-all and
/// without a netns. A create that matches takes one (take()); a background filler builds
/// replacements, one at a time, so the pool costs at most one create's CPU at any moment.
///
/// Pool guests are records in the owner's store marked `pooled`, so that a restart knows
/// them (reconcile hands the live ones back; the pool keeps what its targets allow and
/// deletes the rest). They are never in the owner's guest map: nothing that looks guests up
/// by id — exec, files, get, list, delete — can reach one before it is taken.
///
/// Locking: the owner's records mutex guards the pool's state and serializes the store
/// (record_store is not thread-safe). Calls marked "(mutex held)" expect the caller to hold
/// it; the filler takes it itself and never holds it across a backend call.
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
  };

  /// `adopted`: pool guests reconcile found alive; waiters a previous server started in them
  /// are killed, and new ones started. Starts the filler.
  warm_pool(guest_backend& backend, record_store& store, image_store& images, std::mutex& mu,
            settings s, std::vector<guest_record> adopted);
  ~warm_pool();
  warm_pool(const warm_pool&) = delete;
  warm_pool& operator=(const warm_pool&) = delete;

  /// (mutex held) A ready guest of `key`, out of the pool, or nullopt. Its record in the
  /// store still says pooled until the caller saves it as the new owner's guest, so a crash
  /// in between hands it back to the pool instead of leaking it. Wakes the filler.
  std::optional<pool_guest> take(const pool_key& key);

  /// (mutex held) A taken guest the caller could not use (its init died): deleted by the
  /// filler, never handed out again.
  void discard(guest_record r);

  /// (mutex held) Per pool: every target, and any pool still holding guests.
  std::vector<pool_status> status() const;

  /// (mutex held) Whether a target names `image` or a pool guest (ready or being built)
  /// has it as its rootfs.
  bool uses_image(const std::string& image) const;

  /// Stops the filler (an in-flight create finishes first) and deletes every pool guest.
  /// Returns how many were deleted. Idempotent; call without the mutex.
  size_t stop();

  /// Tells the filler to build nothing more and returns at once (call without the mutex):
  /// a server's stop does this first, so that a stop waiting on other work (calls in
  /// flight, a fenced node's shared guests) does not go on filling the pool meanwhile.
  void halt();

private:
  using clock = std::chrono::steady_clock;
  struct backoff {
    uint32_t failures = 0;
    clock::time_point until{};
  };

  void fill();
  /// (mutex held) A guest to delete now (discarded, or beyond its pool's target), marked
  /// destroying and persisted; nullopt when none.
  std::optional<pool_guest> next_to_delete();
  /// (mutex held) A pool below target whose backoff has passed.
  std::optional<pool_key> next_to_build(clock::time_point now) const;
  /// Builds one guest of `key` (takes and releases `lock` around the backend call).
  void build(std::unique_lock<std::mutex>& lock, const pool_key& key);
  /// Deletes `r` (mutex free), then erases its record (mutex taken); false on failure.
  bool delete_guest(std::unique_lock<std::mutex>& lock, pool_guest g);
  /// A waiter for `rt` (its image puts `path_prepend` first on PATH), or null (off, or it
  /// failed: warned). Mutex free.
  std::unique_ptr<python_waiter> start_waiter(const guest_runtime& rt,
                                              const std::string& path_prepend);
  void failed(const pool_key& key, const std::string& why);
  uint32_t target_of(const pool_key& key) const;

  guest_backend& backend_;
  record_store& store_;
  image_store& images_;
  std::mutex& mu_;
  settings settings_;
  std::map<pool_key, std::vector<pool_guest>> ready_;
  std::map<pool_key, uint32_t> creating_;
  std::map<pool_key, backoff> backoff_;
  std::vector<pool_guest> discarded_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::condition_variable wake_;
  std::thread filler_;
};

} // namespace guestflow::local
