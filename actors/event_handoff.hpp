#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

namespace guestflow {

/// The events of a run on their way from an actor to one thread that blocks on them (the
/// CLI's printing loop), in arrival order. A plain class; push and pop may run on any
/// threads.
class run_event_queue {
public:
  void push(run_event e);
  /// Blocks until an event is there, then takes the oldest.
  run_event pop();

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<run_event> events_;
};

struct event_handoff_state {
  static inline const char* name = "event_handoff";
  std::shared_ptr<run_event_queue> queue;
};

/// A run subscriber (see actors.hpp) that hands every event to `queue`, so that a blocking
/// thread sees each run's events in seq order without being an actor itself.
event_handoff_actor::behavior_type
event_handoff(event_handoff_actor::stateful_pointer<event_handoff_state> self,
              std::shared_ptr<run_event_queue> queue);

} // namespace guestflow
