// ask_for (actors/ask.hpp): one request for a thread that is not an actor, its answer or
// failure handed to a callback, under CAF's deterministic scheduler.

#include "actors/ask.hpp"
#include "tests/unit/actors/deterministic.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_response_promise.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

/// A destination for the tests: `get` answers at once (or fails for "missing"), `cancel`
/// never answers.
using test_dest_actor =
    caf::typed_actor<caf::replies_to<get_atom, std::string>::with<std::string>,
                     caf::replies_to<cancel_atom, std::string>::with<bool>>;

struct test_dest_state {
  static inline const char* name = "test_dest";
  std::vector<caf::typed_response_promise<bool>> held;
};

test_dest_actor::behavior_type
test_dest(test_dest_actor::stateful_pointer<test_dest_state> self) {
  return {
      [](get_atom, std::string& key) -> caf::result<std::string> {
        if (key == "missing") return make_error(ec::not_found, "no " + key);
        return "value of " + key;
      },
      [self](cancel_atom, std::string&) {
        auto rp = self->make_response_promise<bool>();
        self->state.held.push_back(rp);
        return rp;
      },
  };
}

class ask_test : public deterministic {
protected:
  test_dest_actor dest = sys.spawn(test_dest);
  std::vector<caf::actor> watchers;

  void TearDown() override {
    caf::anon_send_exit(dest, caf::exit_reason::user_shutdown);
    for (auto& w : watchers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    run();
  }

  /// Whether `a` is down.
  template<class Handle>
  std::shared_ptr<bool> watch(const Handle& a) {
    auto down = std::make_shared<bool>(false);
    // Held: an actor nobody references is terminated as unreachable.
    watchers.push_back(sys.spawn([a, down](caf::event_based_actor* self) -> caf::behavior {
      self->monitor(a);
      self->set_down_handler([self, down](caf::down_msg&) {
        *down = true;
        self->quit();
      });
      return {[](const std::string&) {}};
    }));
    return down;
  }

  template<class T>
  answer_callback<T> into(std::shared_ptr<std::vector<result<T>>> out) {
    return [out](result<T> r) { out->push_back(std::move(r)); };
  }
};

} // namespace

TEST_F(ask_test, hands_the_answer_to_the_callback_once_and_quits) {
  auto got = std::make_shared<std::vector<result<std::string>>>();
  auto asker = ask_for<std::string>(sys, dest, caf::duration{30s}, into(got), get_atom::value,
                                    std::string{"k"});
  auto down = watch(asker);
  EXPECT_TRUE(got->empty()); // nothing runs until the scheduler does
  run();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_TRUE(got->front());
  EXPECT_EQ(*got->front(), "value of k");
  EXPECT_TRUE(*down);
}

TEST_F(ask_test, hands_an_error_answer_over_as_its_failure) {
  auto got = std::make_shared<std::vector<result<std::string>>>();
  auto asker = ask_for<std::string>(sys, dest, caf::duration{30s}, into(got), get_atom::value,
                                    std::string{"missing"});
  auto down = watch(asker);
  run();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_FALSE(got->front());
  EXPECT_EQ(got->front().error(), fail(ec::not_found, "no missing"));
  EXPECT_TRUE(*down);
}

TEST_F(ask_test, a_destination_that_never_answers_is_transient_at_the_time_limit) {
  auto got = std::make_shared<std::vector<result<bool>>>();
  auto asker = ask_for<bool>(sys, dest, caf::duration{5s}, into(got), cancel_atom::value,
                             std::string{"x"});
  auto down = watch(asker);
  run();
  EXPECT_TRUE(got->empty());
  EXPECT_FALSE(*down); // waiting, within its limit
  advance(6s);
  ASSERT_EQ(got->size(), 1u);
  ASSERT_FALSE(got->front());
  EXPECT_EQ(got->front().error().code, ec::transient);
  EXPECT_TRUE(*down);
}

TEST_F(ask_test, an_answer_leaves_no_time_limit_behind) {
  auto got = std::make_shared<std::vector<result<std::string>>>();
  ask_for<std::string>(sys, dest, caf::duration{30s}, into(got), get_atom::value,
                       std::string{"k"});
  EXPECT_EQ(sched.clock().schedule().size(), 1u);
  run();
  ASSERT_EQ(got->size(), 1u);
  // A timeout left armed would keep the asker (and what its callback holds) for 30 s.
  EXPECT_TRUE(sched.clock().schedule().empty());
  EXPECT_TRUE(sched.clock().actor_lookup().empty());
}

TEST_F(ask_test, a_dead_destination_is_unavailable_and_never_answered_on_the_asking_thread) {
  caf::anon_send_exit(dest, caf::exit_reason::user_shutdown);
  run();
  auto got = std::make_shared<std::vector<result<std::string>>>();
  ask_for<std::string>(sys, dest, caf::duration{30s}, into(got), get_atom::value,
                       std::string{"k"});
  // The dead destination bounced the request at once, on this thread: the callback waits
  // for an actor thread, as every other answer does.
  EXPECT_TRUE(got->empty());
  run();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_FALSE(got->front());
  EXPECT_EQ(got->front().error().code, ec::unavailable);
}

TEST_F(ask_test, a_request_dropped_unanswered_without_a_limit_is_unavailable) {
  auto got = std::make_shared<std::vector<result<bool>>>();
  // `cancel` holds its promise; the destination then ends without answering it.
  ask_for<bool>(sys, dest, caf::duration{caf::infinite}, into(got), cancel_atom::value,
                std::string{"x"});
  run();
  EXPECT_TRUE(got->empty());
  caf::anon_send_exit(dest, caf::exit_reason::user_shutdown);
  run();
  ASSERT_EQ(got->size(), 1u);
  ASSERT_FALSE(got->front());
  EXPECT_EQ(got->front().error().code, ec::unavailable);
}
