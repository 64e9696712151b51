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

/// Borrows `loop`, retrying while its owner thread does not get the CPU within the
/// hand-over wait (a loaded host); nullptr after 10 s.
std::shared_ptr<lendable_loop> borrow_within_10s() {
  for (auto until = std::chrono::steady_clock::now() + 10s;
       std::chrono::steady_clock::now() < until;)
    if (auto got = lendable_loop::borrow()) return got;
  return nullptr;
}

TEST(lendable_loop, its_owner_thread_runs_it_until_a_borrower_takes_it) {
  auto loop = task_loop::lent();
  EXPECT_EQ(loop->runner(), loop->owner_id());
  EXPECT_TRUE(lendable_loop::any_to_borrow());
  auto borrowed = borrow_within_10s();
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
  EXPECT_EQ(loop->runner(), loop->owner_id());
  loop->stop();
  EXPECT_FALSE(lendable_loop::any_to_borrow());
}

TEST(lendable_loop, a_reclaim_wakes_the_borrower_and_waits_for_it_to_leave) {
  auto loop = task_loop::lent();
  ASSERT_EQ(borrow_within_10s(), loop);
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
  EXPECT_EQ(loop->runner(), loop->owner_id());
  EXPECT_FALSE(lendable_loop::any_to_borrow());
  // A nudge after the reclaim reaches no loop (its owner may be gone).
  wakes = loop->wakes();
  loop->nudge();
  EXPECT_EQ(loop->wakes(), wakes);
  loop->stop();
}

TEST(lendable_loop, a_reclaim_from_inside_the_borrowed_loop_returns_at_once) {
  auto loop = task_loop::lent();
  ASSERT_EQ(borrow_within_10s(), loop);
  bool returned = false;
  loop->post([&] {
    loop->reclaim(); // a handler that shuts the owner down: must not wait for itself
    returned = true;
  });
  ASSERT_TRUE(loop->enter());
  loop->run_one();
  EXPECT_TRUE(returned);
  loop->leave(); // hands it back
  EXPECT_EQ(loop->runner(), loop->owner_id());
  loop->stop();
}

TEST(lendable_loop, a_borrow_gives_up_while_the_owner_thread_is_busy_then_succeeds) {
  auto loop = task_loop::lent();
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
