// The runtime's work-sharing scheduler policy (actors/work_sharing.hpp) in a real actor
// system: a job enqueued from a thread that is no worker, while every worker sleeps, is
// always run (no lost wake-up), with one worker or several; nothing is lost under load from
// many threads at once; and the system stops.

#include "actors/system_settings.hpp"
#include "actors/work_sharing.hpp"

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <chrono>
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

TEST_P(work_sharing_test, a_job_handed_to_sleeping_workers_always_runs) {
  config cfg{GetParam()};
  caf::actor_system sys{cfg};
  auto echo = sys.spawn([]() -> caf::behavior { return {[](int32_t x) { return x; }}; });
  caf::scoped_actor self{sys};
  // Each round starts with every worker idle (the last answer was received), so each
  // request is a hand-off to a sleeping worker from a thread that is none.
  for (int32_t i = 0; i < 2000; ++i) {
    bool answered = false;
    self->request(echo, 5s, i)
        .receive([&](int32_t r) { answered = r == i; },
                 [&](caf::error& e) { ADD_FAILURE() << i << ": " << caf::to_string(e); });
    ASSERT_TRUE(answered) << i;
  }
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

INSTANTIATE_TEST_SUITE_P(workers, work_sharing_test, ::testing::Values(1, 3));

} // namespace
