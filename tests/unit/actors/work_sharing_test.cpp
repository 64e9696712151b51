// The runtime's work-sharing scheduler policy (actors/work_sharing.hpp) in a real actor
// system: a job enqueued from a thread that is no worker, while every worker sleeps, is
// always run (no lost wake-up), with one worker or several; nothing is lost under load from
// many threads at once; and the system stops. With a loop lent (common/lendable_loop.hpp),
// an idle worker runs it: its handlers run on a worker, jobs still reach a worker that
// waits in it, and the loop goes back to its own thread when the system ends or its owner
// takes it back.

#include "actors/system_settings.hpp"
#include "actors/work_sharing.hpp"
#include "tests/support/task_loop.hpp"

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <chrono>
#include <future>
#include <gtest/gtest.h>
#include <memory>
#include <thread>
#include <vector>

using namespace guestflow;
using namespace std::chrono_literals;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using count_atom = caf::atom_constant<caf::atom("count")>;

struct config : caf::actor_system_config {
  explicit config(size_t workers) {
    apply_runtime_settings(*this);
    set("scheduler.max-threads", workers);
  }
};

/// Counts `ping`s; answers `count` with the total.
caf::behavior counter(caf::event_based_actor*) {
  auto n = std::make_shared<int64_t>(0);
  return {
      [n](ping_atom) { ++*n; },
      [n](count_atom) { return *n; },
  };
}

class work_sharing_test : public ::testing::TestWithParam<size_t> {};

/// Sends `n` requests to `echo` one after another from the test's thread (no worker), each
/// after the last answer: with every worker idle, each is a hand-off to a sleeping worker
/// (or one waiting in a lent loop). The index of the first unanswered one, or `n`.
int32_t answered_in_turn(caf::actor_system& sys, const caf::actor& echo, int32_t n) {
  caf::scoped_actor self{sys};
  for (int32_t i = 0; i < n; ++i) {
    bool answered = false;
    self->request(echo, 5s, i)
        .receive([&](int32_t r) { answered = r == i; },
                 [&](caf::error& e) { ADD_FAILURE() << i << ": " << caf::to_string(e); });
    if (!answered) return i;
  }
  return n;
}

/// Answers each int32 with itself.
caf::behavior echo_behavior() {
  return {[](int32_t x) { return x; }};
}

TEST_P(work_sharing_test, a_job_handed_to_sleeping_workers_always_runs) {
  config cfg{GetParam()};
  caf::actor_system sys{cfg};
  auto echo = sys.spawn(echo_behavior);
  EXPECT_EQ(answered_in_turn(sys, echo, 2000), 2000);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

TEST_P(work_sharing_test, nothing_is_lost_when_many_threads_enqueue_at_once) {
  config cfg{GetParam()};
  caf::actor_system sys{cfg};
  std::vector<caf::actor> counters;
  for (int i = 0; i < 16; ++i)
    counters.push_back(sys.spawn(counter));
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i)
        caf::anon_send(counters[(i + t) % counters.size()], ping_atom::value);
    });
  for (auto& t : senders)
    t.join();
  caf::scoped_actor self{sys};
  int64_t total = 0;
  for (auto& c : counters)
    self->request(c, 10s, count_atom::value)
        .receive([&](int64_t n) { total += n; },
                 [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  EXPECT_EQ(total, int64_t{threads} * per_thread);
  for (auto& c : counters)
    caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
}

/// Polls until the scheduler borrowed `loop` (its owner's thread stepped aside).
bool borrowed_within(const lendable_loop& loop, std::chrono::seconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < until;) {
    if (loop.borrowed()) return true;
    std::this_thread::sleep_for(1ms); // polled with a deadline
  }
  return false;
}

TEST_P(work_sharing_test, an_idle_worker_runs_a_lent_loop_until_the_system_ends) {
  auto loop = test_support::task_loop::lent();
  {
    config cfg{GetParam()};
    caf::actor_system sys{cfg};
    ASSERT_TRUE(borrowed_within(*loop, 10s));
    auto on_worker = loop->runner();
    EXPECT_NE(on_worker, loop->owner_id());
    EXPECT_NE(on_worker, std::this_thread::get_id());
    // Answers handed from the loop to an actor, and back: the actor's jobs run on the worker
    // that runs the loop, and what they post waits for that worker's next idle moment.
    auto echo = sys.spawn(echo_behavior);
    std::promise<int32_t> done;
    std::function<void(int32_t)> step = [&](int32_t i) {
      if (i == 1000) return done.set_value(i);
      loop->post([&, i] {
        sys.spawn([&, i](caf::event_based_actor* self) {
          self->request(echo, 5s, i)
              .then([&](int32_t r) { step(r + 1); },
                    [&](caf::error& e) {
                      ADD_FAILURE() << caf::to_string(e);
                      done.set_value(-1);
                    });
        });
      });
    };
    step(0);
    auto finished = done.get_future();
    ASSERT_EQ(finished.wait_for(30s), std::future_status::ready);
    EXPECT_EQ(finished.get(), 1000);
    // A job from a thread that is no worker reaches the worker waiting in the loop.
    EXPECT_EQ(answered_in_turn(sys, echo, 2000), 2000);
    caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  }
  // The system ended: the loop's own thread runs it again, and it can be borrowed again.
  EXPECT_EQ(loop->runner(), loop->owner_id());
  EXPECT_TRUE(lendable_loop::any_to_borrow());
  loop->stop();
}

TEST_P(work_sharing_test, a_loop_its_owner_takes_back_returns_to_its_thread) {
  auto loop = test_support::task_loop::lent();
  config cfg{GetParam()};
  caf::actor_system sys{cfg};
  ASSERT_TRUE(borrowed_within(*loop, 10s));
  EXPECT_NE(loop->runner(), loop->owner_id());
  loop->reclaim(); // the owner shuts down while a worker waits in its loop
  EXPECT_EQ(loop->runner(), loop->owner_id());
  // The workers sleep as before.
  auto echo = sys.spawn(echo_behavior);
  EXPECT_EQ(answered_in_turn(sys, echo, 200), 200);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
  loop->stop();
}

INSTANTIATE_TEST_SUITE_P(workers, work_sharing_test, ::testing::Values(1, 3));

} // namespace
