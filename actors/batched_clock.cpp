#include "actors/batched_clock.hpp"

#include "actors/work_sharing.hpp"

#include <caf/config_value.hpp>
#include <caf/defaults.hpp>
#include <caf/policy/work_stealing.hpp>
#include <caf/settings.hpp>
#include <stdexcept>
#include <string>

namespace guestflow {

batched_clock::batched_clock() {
  inbox_.reserve(batch);
}

void batched_clock::set_ordinary_timeout(time_point t, caf::abstract_actor* self,
                                         caf::atom_value type, uint64_t id) {
  push(new ordinary_timeout(t, self->ctrl(), type, id), t);
}

void batched_clock::set_request_timeout(time_point t, caf::abstract_actor* self,
                                        caf::message_id id) {
  push(new request_timeout(t, self->ctrl(), id), t);
}

void batched_clock::set_multi_timeout(time_point t, caf::abstract_actor* self,
                                      caf::atom_value type, uint64_t id) {
  push(new multi_timeout(t, self->ctrl(), type, id), t);
}

void batched_clock::cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) {
  push(new ordinary_timeout_cancellation(self->id(), type), time_point::max());
}

void batched_clock::cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) {
  push(new request_timeout_cancellation(self->id(), id), time_point::max());
}

void batched_clock::cancel_timeouts(caf::abstract_actor* self) {
  push(new timeouts_cancellation(self->id()), time_point::max());
}

void batched_clock::schedule_message(time_point t, caf::strong_actor_ptr receiver,
                                     caf::mailbox_element_ptr content) {
  push(new actor_msg(t, std::move(receiver), std::move(content)), t);
}

void batched_clock::schedule_message(time_point t, caf::group target,
                                     caf::strong_actor_ptr sender, caf::message content) {
  push(new group_msg(t, std::move(target), std::move(sender), std::move(content)), t);
}

void batched_clock::cancel_all() {
  push(new drop_all, time_point::min());
}

void batched_clock::stop() {
  push(new shutdown, time_point::min());
}

uint64_t batched_clock::wakeups() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return wakeups_;
}

void batched_clock::push(event* ev, time_point due) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    inbox_.emplace_back(ev);
    if (!woken_ && (due < next_wake_ || inbox_.size() >= batch)) wake = woken_ = true;
  }
  if (wake) cv_.notify_one();
}

void batched_clock::run() {
  std::vector<unique_event_ptr> events;
  events.reserve(batch);
  std::unique_lock<std::mutex> guard{mtx_};
  for (;;) {
    if (inbox_.empty()) {
      // Only the schedule says when to wake: a queued event would have been taken above.
      next_wake_ = schedule_.empty() ? time_point::max() : schedule_.begin()->first;
      woken_ = false;
      auto pushed = [this] { return woken_; };
      if (next_wake_ == time_point::max())
        cv_.wait(guard, pushed);
      else
        cv_.wait_until(guard, next_wake_, pushed);
      next_wake_ = time_point::min(); // awake: nothing needs to wake us until we wait again
      ++wakeups_;
    }
    events.swap(inbox_);
    guard.unlock();
    // Outside the lock: firing an event enqueues to an actor, whose cleanup may cancel its
    // timeouts, which pushes here.
    auto go_on = apply(events);
    events.clear();
    if (!go_on) return;
    trigger_expired_timeouts();
    guard.lock();
  }
}

bool batched_clock::apply(std::vector<unique_event_ptr>& events) {
  for (auto& x : events) {
    switch (x->subtype) {
    case ordinary_timeout_cancellation_type:
      handle(static_cast<ordinary_timeout_cancellation&>(*x));
      break;
    case request_timeout_cancellation_type:
      handle(static_cast<request_timeout_cancellation&>(*x));
      break;
    case timeouts_cancellation_type:
      handle(static_cast<timeouts_cancellation&>(*x));
      break;
    case drop_all_type:
      schedule_.clear();
      actor_lookup_.clear();
      break;
    case shutdown_type:
      schedule_.clear();
      actor_lookup_.clear();
      return false;
    case ordinary_timeout_type:
      add_schedule_entry(
          std::unique_ptr<ordinary_timeout>{static_cast<ordinary_timeout*>(x.release())});
      break;
    case multi_timeout_type:
      add_schedule_entry(
          std::unique_ptr<multi_timeout>{static_cast<multi_timeout*>(x.release())});
      break;
    case request_timeout_type:
      add_schedule_entry(
          std::unique_ptr<request_timeout>{static_cast<request_timeout*>(x.release())});
      break;
    case actor_msg_type:
      add_schedule_entry(std::unique_ptr<actor_msg>{static_cast<actor_msg*>(x.release())});
      break;
    case group_msg_type:
      add_schedule_entry(std::unique_ptr<group_msg>{static_cast<group_msg*>(x.release())});
      break;
    default:
      break;
    }
  }
  return true;
}

void use_batched_clock(caf::actor_system_config& cfg) {
  cfg.module_factories.push_back([](caf::actor_system& sys) -> caf::actor_system::module* {
    auto policy =
        caf::get_or(sys.config(), "scheduler.policy", caf::defaults::scheduler::policy);
    if (policy == caf::atom("sharing")) return new batched_clock_coordinator<work_sharing>(sys);
    if (policy == caf::atom("stealing"))
      return new batched_clock_coordinator<caf::policy::work_stealing>(sys);
    throw std::invalid_argument("use_batched_clock: scheduler.policy must be sharing or "
                                "stealing, not " +
                                caf::to_string(policy));
  });
}

} // namespace guestflow
