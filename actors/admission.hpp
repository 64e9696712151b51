#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace guestflow {

/// The runtime's execution slots, shared by every surface that starts a guest (whole-flow
/// runs through the coordinator, sandbox and component runs through the bridge): at most
/// `max_inflight` runs hold a slot, at most `max_queued` whole-flow runs wait in FIFO order,
/// and beyond that a run is refused at once (LangSmith's NoSandboxHostsAvailable behaviour:
/// never silent waiting without a bound). Sandbox and component runs never queue: their
/// caller holds an HTTP request open, so they start or are refused. Thread-safe: the
/// coordinator (an actor) and the bridge's I/O threads share one.
class admission {
public:
  enum class verdict { start, queued, refused };

  explicit admission(uint64_t max_inflight = 1, uint64_t max_queued = 0)
      : max_inflight_(max_inflight)
      , max_queued_(max_queued) {}

  admission(const admission&) = delete;
  admission& operator=(const admission&) = delete;

  /// A whole-flow run: a slot, else a queue place, else refused.
  verdict offer(const std::string& id);

  /// A run that cannot wait (sandbox, component): a slot or nothing. Queued runs go first,
  /// so a stream of short calls never starves the queue.
  bool take(const std::string& id);

  /// A run that cannot queue, where every slot is taken but one is draining: waits for a
  /// slot (`queued`; `on_start` runs when release() hands it one, on the releasing thread,
  /// outside the lock) instead of being refused. No more runs wait than slots drain.
  verdict take_or_wait(const std::string& id, std::function<void()> on_start);

  /// `id`, holding a slot, has answered its caller and is deleting its guest: the slot stays
  /// taken until release(id) (the guest still counts), but a run that finds every slot
  /// taken may wait for it (offer, take_or_wait) instead of being refused.
  void draining(const std::string& id);

  /// `id` no longer needs its slot or its queue place (finished, cancelled, gone; unknown
  /// ids are ignored). Returns the queued ids that now hold a slot, in FIFO order: their
  /// owner (the coordinator) must start them; a take_or_wait() run among them is started
  /// here (its `on_start`) and not returned.
  std::vector<std::string> release(const std::string& id);

  /// Whether a run that cannot queue would be refused now (a hint: the transport refuses
  /// such a request before reading its body; take() or take_or_wait() decides).
  bool full() const;
  /// Whether a whole-flow run would be refused now (no slot and no queue place).
  bool full_with_queue() const;

  uint64_t inflight() const;
  uint64_t queued() const;
  uint64_t max_inflight() const noexcept { return max_inflight_; }
  uint64_t max_queued() const noexcept { return max_queued_; }

private:
  const uint64_t max_inflight_;
  const uint64_t max_queued_;
  mutable std::mutex mu_;
  std::unordered_set<std::string> inflight_;
  std::unordered_set<std::string> draining_; ///< of inflight_
  std::deque<std::string> queue_;
  /// take_or_wait() runs in queue_, by id: what starts them.
  std::unordered_map<std::string, std::function<void()>> waiters_;
};

} // namespace guestflow
