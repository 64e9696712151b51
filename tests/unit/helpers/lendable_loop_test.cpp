// common/lendable_loop.hpp: the hand-over protocol between a loop's owner thread and a
// borrower, with a loop of posted functions (tests/support/task_loop.hpp). The scheduler's
// side is in tests/unit/actors/work_sharing_test.cpp.

#include "tests/support/task_loop.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <gtest/gtest.h>
#include <memory>
#include <thread>
#include <utility>

using namespace guestflow;
using guestflow::test_support::task_loop;
using namespace std::chrono_literals;

namespace {

/// Where the next posted task runs.
std::thread::id runner_of(task_loop& loop) {
  auto where = std::make_shared<std::promise<std::thread::id>>();
  auto got = where->get_future();
  loop.post([where] { where->set_value(std::this_thread::get_id()); });
  if (got.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "the task did not run within 10 s";
    return {};
  }
  return got.get();
}

std::shared_ptr<task_loop> lent_loop() {
  auto loop = std::make_shared<task_loop>();
  loop->start();
  lendable_loop::lend(loop);
  return loop;
}

TEST(lendable_loop, its_owner_thread_runs_it_until_a_borrower_takes_it) {
  auto loop = lent_loop();
  EXPECT_EQ(runner_of(*loop), loop->owner_id());
  EXPECT_TRUE(lendable_loop::any_to_borrow());
  auto borrowed = lendable_loop::borrow();
  ASSERT_EQ(borrowed, loop);
  EXPECT_FALSE(lendable_loop::any_to_borrow());
  // Borrowed: what is posted waits for the borrower, whose thread runs it.
  std::atomic<bool> ran{false};
  std::thread::id where;
  loop->post([&] {
    where = std::this_thread::get_id();
    ran = true;
  });
  std::this_thread::sleep_for(20ms); // not a synchronisation: room for a wrong run
  EXPECT_FALSE(ran.load());
  ASSERT_TRUE(loop->enter());
  EXPECT_TRUE(loop->borrowed_here());
  EXPECT_TRUE(loop->run_one());
  loop->leave();
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(where, std::this_thread::get_id());
  // Given back: the owner thread runs it again, and it may be borrowed again.
  loop->give_back();
  EXPECT_TRUE(lendable_loop::any_to_borrow());
  EXPECT_EQ(runner_of(*loop), loop->owner_id());
  loop->stop();
  EXPECT_FALSE(lendable_loop::any_to_borrow());
}

TEST(lendable_loop, a_reclaim_wakes_the_borrower_and_waits_for_it_to_leave) {
  auto loop = lent_loop();
  ASSERT_EQ(lendable_loop::borrow(), loop);
  std::atomic<int> runs{0};
  std::promise<void> inside;
  auto wakes = loop->wakes();
  std::thread borrower([&] { // runs the loop until the owner takes it back
    bool first = true;
    while (loop->enter()) {
      if (std::exchange(first, false)) inside.set_value();
      loop->run_one(); // blocks: nothing is posted, only the reclaim's wake-up ends it
      loop->leave();
      ++runs;
    }
  });
  inside.get_future().wait();
  loop->reclaim();
  EXPECT_GT(loop->wakes(), wakes);
  EXPECT_FALSE(loop->enter()); // reclaimed: never borrowed again
  borrower.join();
  EXPECT_GE(runs.load(), 1);
  EXPECT_EQ(runner_of(*loop), loop->owner_id());
  EXPECT_FALSE(lendable_loop::any_to_borrow());
  // A nudge after the reclaim reaches no loop (its owner may be gone).
  wakes = loop->wakes();
  loop->nudge();
  EXPECT_EQ(loop->wakes(), wakes);
  loop->stop();
}

TEST(lendable_loop, a_reclaim_from_inside_the_borrowed_loop_returns_at_once) {
  auto loop = lent_loop();
  ASSERT_EQ(lendable_loop::borrow(), loop);
  bool returned = false;
  loop->post([&] {
    loop->reclaim(); // a handler that shuts the owner down: must not wait for itself
    returned = true;
  });
  ASSERT_TRUE(loop->enter());
  loop->run_one();
  EXPECT_TRUE(returned);
  loop->leave(); // hands it back
  EXPECT_EQ(runner_of(*loop), loop->owner_id());
  loop->stop();
}

TEST(lendable_loop, a_borrow_gives_up_while_the_owner_thread_is_busy_then_succeeds) {
  auto loop = lent_loop();
  std::promise<void> release;
  auto busy = release.get_future().share();
  std::promise<void> entered;
  loop->post([&entered, busy] {
    entered.set_value();
    busy.wait(); // a long handler: the owner cannot step aside
  });
  entered.get_future().wait();
  EXPECT_EQ(lendable_loop::borrow(), nullptr);
  EXPECT_TRUE(lendable_loop::any_to_borrow()); // still free to borrow later
  release.set_value();
  std::shared_ptr<lendable_loop> got;
  for (auto until = std::chrono::steady_clock::now() + 10s;
       !got && std::chrono::steady_clock::now() < until;)
    got = lendable_loop::borrow();
  EXPECT_EQ(got, loop);
  loop->stop();
}

} // namespace
