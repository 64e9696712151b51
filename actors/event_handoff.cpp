#include "actors/event_handoff.hpp"

namespace guestflow {

void run_event_queue::push(run_event e) {
  {
    std::lock_guard<std::mutex> guard{mu_};
    events_.push_back(std::move(e));
  }
  cv_.notify_one();
}

run_event run_event_queue::pop() {
  std::unique_lock<std::mutex> guard{mu_};
  cv_.wait(guard, [this] { return !events_.empty(); });
  auto e = std::move(events_.front());
  events_.pop_front();
  return e;
}

event_handoff_actor::behavior_type
event_handoff(event_handoff_actor::stateful_pointer<event_handoff_state> self,
              std::shared_ptr<run_event_queue> queue) {
  self->state.queue = std::move(queue);
  return {
      // Mutable: a message only this subscriber holds is moved, not copied.
      [self](run_event& e) { self->state.queue->push(std::move(e)); },
  };
}

} // namespace guestflow
