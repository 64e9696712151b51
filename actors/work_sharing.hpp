#pragma once

#include "common/lendable_loop.hpp"

#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore.h>
#include <time.h>

namespace guestflow {

/// CAF 0.17's work-sharing scheduler policy (one queue for all workers), minus the system
/// calls it makes on every hand-off to a sleeping worker, from a thread that is not one
/// (the HTTP client's, the bridge's) or between actors. CAF's worker sleeps on a condition
/// variable, and CAF signals it while holding the queue's lock, so the worker it wakes
/// blocks at once on that lock; and glibc re-takes a condition variable's mutex as
/// contended, so every unlock after a wait is one more futex call: 4-6 futex calls per
/// hand-off, measured. Here a worker sleeps on a semaphore that an enqueuer posts only
/// for a worker that announced its sleep, after releasing the lock: one futex call on each
/// side. CAF also allocates a list node per job; here the queue is a deque.
/// Same order and same guarantees otherwise: FIFO, a job runs on whichever worker is free.
///
/// An idle worker does not sleep while there is a control-plane client's I/O loop to
/// borrow (common/lendable_loop.hpp): it runs that loop until a job comes, so the answers
/// the loop hands to actors, and the calls actors start on it, cross no thread. One worker
/// runs it at a time; the others sleep as before, and are woken first. A busy worker still
/// runs the loop's ready handlers every `poll_every` jobs.
class work_sharing : public caf::policy::unprofiled {
public:
  static constexpr uint32_t poll_every = 32;
  static constexpr std::chrono::milliseconds retry_borrow_after{100};

  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) { sem_init(&wake, 0, 0); }
    ~coordinator_data() {
      // The workers are gone: the loop's own thread runs it again.
      if (loop) loop->give_back();
      sem_destroy(&wake);
    }
    coordinator_data(const coordinator_data&) = delete;
    coordinator_data& operator=(const coordinator_data&) = delete;

    std::mutex lock;
    std::deque<caf::resumable*> queue; ///< guarded by lock
    size_t sleepers = 0; ///< workers that will wait on `wake` and no post owes; guarded by lock
    sem_t wake;          ///< one post per sleeper an enqueuer claimed
    // Guarded by lock:
    std::shared_ptr<lendable_loop> loop; ///< borrowed: idle workers run it
    bool running_loop = false;           ///< a worker is in it (or about to be)
    bool loop_nudged = false;            ///< a wake-up is on its way to that worker
    bool borrowing = false;              ///< a worker is borrowing one
    std::chrono::steady_clock::time_point borrow_after{}; ///< after a failed borrow
    uint32_t since_poll = 0; ///< jobs taken since the loop last ran
  };

  /// The scheduler whose loop the calling thread is running (its enqueues need no wake-up:
  /// the thread looks at the queue as soon as the handler returns).
  static const coordinator_data*& running_loop_for() {
    static thread_local const coordinator_data* d = nullptr;
    return d;
  }

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  template<class Coordinator>
  void enqueue(Coordinator* self, caf::resumable* job) {
    auto& d = self->data();
    bool wake = false;
    std::shared_ptr<lendable_loop> nudge;
    {
      std::lock_guard<std::mutex> guard{d.lock};
      d.queue.push_back(job);
      if (running_loop_for() == &d) {
        // A handler of the loop: this worker takes the job when the handler returns, on
        // the thread that has the answer in cache, without waking another.
      } else if (d.sleepers > 0) {
        --d.sleepers;
        wake = true;
      } else if (d.running_loop && !d.loop_nudged) {
        d.loop_nudged = true;
        nudge = d.loop;
      }
    }
    // A post made before its sleeper reaches sem_wait is kept by the semaphore, and a
    // nudge before the worker is in the loop by the loop: no lost wake-up.
    if (wake) sem_post(&d.wake);
    if (nudge) nudge->nudge();
  }

  template<class Coordinator>
  void central_enqueue(Coordinator* self, caf::resumable* job) {
    enqueue(self, job);
  }

  template<class Worker>
  void external_enqueue(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template<class Worker>
  void internal_enqueue(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template<class Worker>
  void resume_job_later(Worker* self, caf::resumable* job) {
    enqueue(self->parent(), job);
  }

  template<class Worker>
  caf::resumable* dequeue(Worker* self) {
    auto& d = self->parent()->data();
    for (;;) {
      caf::resumable* job = nullptr;
      std::shared_ptr<lendable_loop> loop; // to run now: ready handlers only if there is a job
      bool borrow = false;
      std::optional<std::chrono::steady_clock::time_point> retry_at; // of a failed borrow
      {
        std::lock_guard<std::mutex> guard{d.lock};
        if (!d.queue.empty()) {
          job = d.queue.front();
          d.queue.pop_front();
          if (!d.loop || d.running_loop || ++d.since_poll < poll_every) return job;
          loop = d.loop;
        } else if (d.loop && !d.running_loop) {
          loop = d.loop;
        } else if (!d.loop && !d.borrowing && lendable_loop::any_to_borrow()) {
          if (std::chrono::steady_clock::now() >= d.borrow_after)
            d.borrowing = borrow = true;
          else { // sleep, but not past the retry: an idle system has no job to wake it
            ++d.sleepers;
            retry_at = d.borrow_after;
          }
        } else {
          ++d.sleepers;
        }
        if (loop) {
          d.running_loop = true;
          d.since_poll = 0;
        }
      }
      if (loop) {
        run_loop(d, *loop, job != nullptr);
        if (job) return job;
        continue;
      }
      if (borrow) {
        auto got = lendable_loop::borrow();
        std::lock_guard<std::mutex> guard{d.lock};
        d.borrowing = false;
        // The loop's thread was busy past the hand-over wait: not again for a while.
        if (!got) d.borrow_after = std::chrono::steady_clock::now() + retry_borrow_after;
        d.loop = std::move(got);
        continue;
      }
      if (retry_at && !sleep_until(d, *retry_at)) continue;
      // Woken, the queue may be empty again (another worker took the job): look again.
      while (sem_wait(&d.wake) != 0 && errno == EINTR) {
      }
    }
  }

  /// Waits on the semaphore until `t`. False: look at the queue again (woken, or `t`
  /// passed and this worker no longer counts as a sleeper). True: `t` passed but an
  /// enqueuer had claimed this sleeper, so its post is on the way for the caller to take.
  static bool sleep_until(coordinator_data& d, std::chrono::steady_clock::time_point t) {
    auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    int r;
    while ((r = sem_clockwait(&d.wake, CLOCK_MONOTONIC, &ts)) != 0 && errno == EINTR) {
    }
    if (r == 0) return false; // woken: look at the queue (the post is taken)
    std::lock_guard<std::mutex> guard{d.lock};
    if (d.sleepers == 0) return true;
    --d.sleepers;
    return false;
  }

  /// Runs `loop` on this worker: one handler, blocking until there is one or a job comes
  /// (`ready_only`: the ready handlers, not blocking). Drops the loop once its owner took it
  /// back or it stopped.
  static void run_loop(coordinator_data& d, lendable_loop& loop, bool ready_only) {
    bool keep = loop.enter();
    if (keep) {
      running_loop_for() = &d;
      if (ready_only)
        loop.poll();
      else
        keep = loop.run_one();
      running_loop_for() = nullptr;
      loop.leave();
      if (!keep) loop.give_back();
    }
    std::lock_guard<std::mutex> guard{d.lock};
    d.running_loop = false;
    d.loop_nudged = false;
    if (!keep) d.loop.reset();
  }

  template<class Worker, class UnaryFunction>
  void foreach_resumable(Worker*, UnaryFunction) {}

  template<class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator* self, UnaryFunction f) {
    auto& d = self->data();
    std::unique_lock<std::mutex> guard{d.lock};
    while (!d.queue.empty()) {
      auto* job = d.queue.front();
      d.queue.pop_front();
      f(job);
    }
  }
};

} // namespace guestflow
