#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_set>
#include <vector>

namespace guestflow {

/// Admission of whole-flow runs: at most `max_inflight` hold an execution slot, at most
/// `max_queued` wait in FIFO order, and beyond that a run is refused at once (LangSmith's
/// NoSandboxHostsAvailable behaviour: never silent waiting without a bound).
class admission {
public:
  enum class verdict { start, queued, refused };

  explicit admission(uint64_t max_inflight = 1, uint64_t max_queued = 0)
      : max_inflight_(max_inflight)
      , max_queued_(max_queued) {}

  verdict offer(const std::string& id);

  /// `id` no longer needs its slot or its queue place (finished, cancelled, gone; unknown
  /// ids are ignored). Returns the queued ids that now hold a slot, in FIFO order.
  std::vector<std::string> release(const std::string& id);

  uint64_t inflight() const noexcept { return inflight_.size(); }
  uint64_t queued() const noexcept { return queue_.size(); }

private:
  uint64_t max_inflight_;
  uint64_t max_queued_;
  std::unordered_set<std::string> inflight_;
  std::deque<std::string> queue_;
};

} // namespace guestflow
