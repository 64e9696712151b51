#pragma once

#include "actors/caf_bridge.hpp"
#include "messages/run.hpp"
#include "messages/type_ids.hpp" // a run_event in a caf::message needs its inspectors

#include <cstddef>
#include <cstdint>
#include <deque>

namespace guestflow {

/// One run's events in seq order under a byte budget (their encoded NDJSON size): past it
/// the oldest are evicted, so a late joiner can be told exactly what it cannot have. The
/// newest event is always kept, even alone over the budget.
class event_log {
public:
  explicit event_log(size_t max_bytes = size_t{4} << 20)
      : max_bytes_(max_bytes) {}

  /// Stamps `e` with `run_id` and the next seq, records it and returns it.
  const run_event& append(run_event e, const std::string& run_id);

  /// The newest event as the message it is kept in (precondition: size() > 0), so that
  /// publishing it to subscribers shares the log's copy instead of making another.
  const caf_bridge::shared_message<run_event>& newest() const { return events_.back().event; }

  uint64_t next() const noexcept { return first_ + events_.size(); } ///< the next seq
  uint64_t first() const noexcept { return first_; } ///< oldest retained (== next() if empty)
  size_t bytes() const noexcept { return bytes_; }
  size_t size() const noexcept { return events_.size(); }

  /// Calls `f(const run_event&)` for every retained event with seq ≥ from, in order.
  template<class F>
  void replay(uint64_t from, F&& f) const {
    for (auto i = from > first_ ? from - first_ : 0; i < events_.size(); ++i)
      f(events_[i].event.get());
  }

private:
  struct entry {
    caf_bridge::shared_message<run_event> event;
    size_t bytes;
  };
  size_t max_bytes_;
  std::deque<entry> events_;
  uint64_t first_ = 0;
  size_t bytes_ = 0;
};

} // namespace guestflow
