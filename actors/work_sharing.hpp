#pragma once

#include <caf/policy/unprofiled.hpp>
#include <caf/resumable.hpp>
#include <cerrno>
#include <cstddef>
#include <deque>
#include <mutex>
#include <semaphore.h>

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
class work_sharing : public caf::policy::unprofiled {
public:
  struct coordinator_data {
    explicit coordinator_data(caf::scheduler::abstract_coordinator*) { sem_init(&wake, 0, 0); }
    ~coordinator_data() { sem_destroy(&wake); }
    coordinator_data(const coordinator_data&) = delete;
    coordinator_data& operator=(const coordinator_data&) = delete;

    std::mutex lock;
    std::deque<caf::resumable*> queue; ///< guarded by lock
    size_t sleepers = 0; ///< workers that will wait on `wake` and no post owes; guarded by lock
    sem_t wake;          ///< one post per sleeper an enqueuer claimed
  };

  struct worker_data {
    explicit worker_data(caf::scheduler::abstract_coordinator*) {}
  };

  template<class Coordinator>
  void enqueue(Coordinator* self, caf::resumable* job) {
    auto& d = self->data();
    bool wake = false;
    {
      std::lock_guard<std::mutex> guard{d.lock};
      d.queue.push_back(job);
      if (d.sleepers > 0) {
        --d.sleepers;
        wake = true;
      }
    }
    // A post made before its sleeper reaches sem_wait is kept by the semaphore: no lost
    // wake-up.
    if (wake) sem_post(&d.wake);
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
      {
        std::lock_guard<std::mutex> guard{d.lock};
        if (!d.queue.empty()) {
          auto* job = d.queue.front();
          d.queue.pop_front();
          return job;
        }
        ++d.sleepers;
      }
      // Woken, the queue may be empty again (another worker took the job): look again.
      while (sem_wait(&d.wake) != 0 && errno == EINTR) {
      }
    }
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
