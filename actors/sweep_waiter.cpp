#include "actors/sweep_waiter.hpp"

#include <caf/error.hpp>
#include <utility>

namespace guestflow {
namespace {

void finish(sweep_waiter_actor::stateful_pointer<sweep_waiter_state> self) {
  if (auto then = std::exchange(self->state.then, nullptr)) then();
  self->quit();
}

} // namespace

sweep_waiter_actor::behavior_type
sweep_waiter(sweep_waiter_actor::stateful_pointer<sweep_waiter_state> self,
             std::function<void()> then) {
  self->state.then = std::move(then);
  // A failed sweep ends the wait as well: the lease is shared either way.
  self->set_error_handler([self](caf::error&) { finish(self); });
  return {
      [self](uint64_t) { finish(self); },
  };
}

} // namespace guestflow
