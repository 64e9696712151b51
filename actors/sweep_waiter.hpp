#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <functional>

namespace guestflow {

struct sweep_waiter_state {
  static inline const char* name = "sweep_waiter";
  std::function<void()> then;
};

/// Stands in as the sender of a sweep sent on someone else's behalf (`caf::send_as`, so
/// that the sweep is in the reaper's mailbox before anything sent later): when the answer
/// arrives — a count or an error — it runs `then` once and quits. The CLI's start-up sweep
/// shares the owner's lease again this way once the sweep has listed.
sweep_waiter_actor::behavior_type
sweep_waiter(sweep_waiter_actor::stateful_pointer<sweep_waiter_state> self,
             std::function<void()> then);

} // namespace guestflow
