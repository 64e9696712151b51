// The batched clock (actors/batched_clock.hpp) in a real actor system with real time: what
// is due still fires, in due order, even when the clock thread sleeps towards a later
// deadline; answered requests do not wake it.

#include "actors/batched_clock.hpp"
#include "actors/system_settings.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/response_promise.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>
#include <chrono>
#include <gtest/gtest.h>
#include <memory>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

using namespace guestflow;
using namespace std::chrono_literals;

namespace {

using ping_atom = caf::atom_constant<caf::atom("ping")>;
using hold_atom = caf::atom_constant<caf::atom("hold")>;

struct runtime_like_config : caf::actor_system_config {
  runtime_like_config() { apply_runtime_settings(*this); }
};

/// Answers `ping` at once; takes `hold` requests and never answers them.
caf::behavior answerer(caf::event_based_actor* self) {
  auto held = std::make_shared<std::vector<caf::response_promise>>();
  return {
      [](ping_atom, int32_t n) { return n; },
      [self, held](hold_atom) {
        held->push_back(self->make_response_promise());
        return held->back();
      },
  };
}

class batched_clock_test : public ::testing::Test {
protected:
  runtime_like_config cfg;
  caf::actor_system sys{cfg};

  batched_clock& clock() { return dynamic_cast<batched_clock&>(sys.clock()); }
};

TEST_F(batched_clock_test, the_runtime_settings_install_it) {
  EXPECT_NO_THROW(clock());
}

TEST_F(batched_clock_test, an_unanswered_request_times_out_while_a_later_one_waits) {
  auto a = sys.spawn(answerer);
  caf::scoped_actor self{sys};
  // The clock thread goes to sleep until the 60 s timeout; the 100 ms one must wake it.
  self->request(a, 60s, hold_atom::value);
  auto before = clock().wakeups();
  caf::error got;
  auto t0 = std::chrono::steady_clock::now();
  self->request(a, 100ms, hold_atom::value)
      .receive([](caf::message&) { ADD_FAILURE() << "a held request was answered"; },
               [&](caf::error& e) { got = e; });
  EXPECT_EQ(got, caf::sec::request_timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 100ms);
  EXPECT_GT(clock().wakeups(), before);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST_F(batched_clock_test, delayed_messages_arrive_in_due_order) {
  caf::scoped_actor self{sys};
  self->delayed_send(self, 60ms, int32_t{3});
  self->delayed_send(self, 20ms, int32_t{1});
  self->delayed_send(self, 40ms, int32_t{2});
  std::vector<int32_t> got;
  for (int i = 0; i < 3; ++i)
    self->receive([&](int32_t n) { got.push_back(n); },
                  caf::after(std::chrono::seconds(10)) >>
                      [&] { ADD_FAILURE() << "none came"; });
  EXPECT_EQ(got, (std::vector<int32_t>{1, 2, 3}));
}

TEST_F(batched_clock_test, answered_requests_wake_it_once_per_batch_at_most) {
  auto a = sys.spawn(answerer);
  caf::scoped_actor self{sys};
  self->request(a, 60s, hold_atom::value); // a deadline far ahead to sleep towards
  constexpr int32_t n = 5'000;             // 10,000 events: a set and a cancel each
  // Let the thread take the first request and fall asleep before counting.
  self->request(a, 60s, ping_atom::value, int32_t{0})
      .receive([](int32_t) {}, [](caf::error&) {});
  auto before = clock().wakeups();
  for (int32_t i = 1; i <= n; ++i)
    self->request(a, 60s, ping_atom::value, i)
        .receive([&](int32_t r) { EXPECT_EQ(r, i); },
                 [](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  auto woken = clock().wakeups() - before;
  // CAF's own clock wakes for each of the 10,000 events it is handed.
  EXPECT_LE(woken, 2 * n / batched_clock::batch + 2);
  caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
}

TEST(batched_clock, another_scheduler_policy_is_refused) {
  // In a child that ends with _exit: a system whose constructor threw leaves CAF's
  // thread-local logger pointing into it, and this thread's exit would then lock a mutex
  // that is gone (it hung or aborted, now and then, after the test had passed).
  EXPECT_EXIT(
      {
        caf::actor_system_config cfg;
        register_types(cfg);
        cfg.set("scheduler.policy", caf::atom("testing"));
        use_batched_clock(cfg);
        try {
          caf::actor_system sys{cfg};
        } catch (const std::invalid_argument&) {
          ::_exit(0);
        }
        ::_exit(1);
      },
      ::testing::ExitedWithCode(0), "");
}

} // namespace
