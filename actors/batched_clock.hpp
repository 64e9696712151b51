#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/detail/set_thread_name.hpp>
#include <caf/detail/thread_safe_actor_clock.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace guestflow {

/// CAF's timeouts and delayed messages, with a clock thread that wakes only when it must.
/// CAF 0.17's clock hands every timeout set and cancelled to its thread through a queue that
/// wakes the thread on each push: a run's 4 requests set and cancel 8 timeouts, and each
/// wake-up (~1 µs of the caller's, more of the clock thread's) costs more than the
/// bookkeeping itself. This clock queues the same events but wakes its thread only for an
/// event due before the thread's next wake-up, a shutdown, or once `batch` events wait. A
/// cancellation never wakes it: the next wake-up applies every queued event in order before
/// it fires what is due, so nothing cancelled fires.
/// Derived from CAF's clock only to satisfy the coordinator's covariant `clock()`; the
/// base's queue is unused.
class batched_clock : public caf::detail::thread_safe_actor_clock {
public:
  /// Queued events that wake the thread even when none is due. A timeout whose
  /// cancellation waits keeps its (maybe finished) actor's memory: 1,024 (~128 runs) cost
  /// 17% more RSS per run in flight at 1,000 than CAF's clock; 128 costs 2-5% and saves
  /// 12-15% CPU per run (bench/runtime/compare.sh, 4 pairs each).
  static constexpr size_t batch = 128;

  batched_clock();

  void set_ordinary_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                            uint64_t id) override;
  void set_request_timeout(time_point t, caf::abstract_actor* self,
                           caf::message_id id) override;
  void set_multi_timeout(time_point t, caf::abstract_actor* self, caf::atom_value type,
                         uint64_t id) override;
  void cancel_ordinary_timeout(caf::abstract_actor* self, caf::atom_value type) override;
  void cancel_request_timeout(caf::abstract_actor* self, caf::message_id id) override;
  void cancel_timeouts(caf::abstract_actor* self) override;
  void schedule_message(time_point t, caf::strong_actor_ptr receiver,
                        caf::mailbox_element_ptr content) override;
  void schedule_message(time_point t, caf::group target, caf::strong_actor_ptr sender,
                        caf::message content) override;
  void cancel_all() override;

  /// The clock thread's loop: returns once `stop` was called.
  void run();

  /// Makes `run` return (events still queued are dropped, as CAF's clock drops them).
  void stop();

  /// How often the clock thread has woken so far (for tests).
  uint64_t wakeups() const;

private:
  /// Queues `ev`; wakes the thread if `due` comes before its next wake-up.
  void push(event* ev, time_point due);

  /// Applies `events` in order to the schedule; false once a shutdown was among them.
  bool apply(std::vector<unique_event_ptr>& events);

  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::vector<unique_event_ptr> inbox_;     ///< guarded by mtx_
  time_point next_wake_{time_point::min()}; ///< the sleeping thread's deadline; min when awake
  bool woken_ = false;                      ///< a wake-up is already on its way
  uint64_t wakeups_ = 0;
};

/// CAF's coordinator with `batched_clock` as the system's clock (the base's own clock thread
/// stays idle: nothing reaches it).
template<class Policy>
class batched_clock_coordinator final : public caf::scheduler::coordinator<Policy> {
public:
  using super = caf::scheduler::coordinator<Policy>;
  using super::super;

  caf::detail::thread_safe_actor_clock& clock() noexcept override { return clock_; }

protected:
  void start() override {
    thread_ = std::thread{[this] {
      caf::detail::set_thread_name("caf.clock");
      this->system().thread_started();
      clock_.run();
      this->system().thread_terminates();
    }};
    super::start();
  }

  /// The workers stop first: until they have, an actor may still set a timeout.
  void stop() override {
    super::stop();
    clock_.stop();
    thread_.join();
  }

private:
  batched_clock clock_;
  std::thread thread_;
};

/// Makes systems built from `cfg` use `batched_clock_coordinator` with the scheduler policy
/// `cfg` names: "sharing" (guestflow's `work_sharing`) or "stealing" (CAF's); building the
/// system throws on any other.
void use_batched_clock(caf::actor_system_config& cfg);

} // namespace guestflow
