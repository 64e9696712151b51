// The adapter over CAF 0.17 internals (actors/caf_bridge.hpp). Each test states one thing
// guestflow relies on; a CAF upgrade that changes it fails here, not in production.

#include "actors/caf_bridge.hpp"
#include "deterministic.hpp"

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

using ask_atom = caf::atom_constant<caf::atom("ask")>;

/// Takes every request over and leaves the answering to the test (another thread, later).
using answerer_actor = caf::typed_actor<caf::replies_to<ask_atom, int32_t>::with<std::string>>;

using taken_list = std::vector<std::pair<int32_t, caf_bridge::reply_address>>;

struct answerer_state {
  static inline const char* name = "answerer";
  std::shared_ptr<taken_list> taken;
  std::function<void()> on_taken;
};

answerer_actor::behavior_type answerer(answerer_actor::stateful_pointer<answerer_state> self,
                                       std::shared_ptr<taken_list> taken,
                                       std::function<void()> on_taken) {
  self->state.taken = std::move(taken);
  self->state.on_taken = std::move(on_taken);
  return {
      [self](ask_atom, int32_t n) -> caf::typed_response_promise<std::string> {
        auto [rp, to] = caf_bridge::take_over_request<std::string>(self);
        self->state.taken->emplace_back(n, std::move(to));
        if (self->state.on_taken) self->state.on_taken();
        return rp;
      },
  };
}

/// What one requester heard, by the number it asked with.
struct heard {
  std::map<int32_t, std::string> values;
  std::map<int32_t, failure> errors;
  size_t total() const { return values.size() + errors.size(); }
};

class caf_bridge_test : public deterministic {
protected:
  std::shared_ptr<taken_list> taken = std::make_shared<taken_list>();
  std::shared_ptr<heard> got = std::make_shared<heard>();
  answerer_actor answering;

  void SetUp() override {
    answering = sys.spawn(answerer, taken, std::function<void()>{});
    run();
  }

  void TearDown() override {
    // Requests a failing test left unanswered time out, so that no requester outlives the
    // test (the actor system's destructor would wait for it forever).
    advance(std::chrono::minutes{1});
    caf::anon_send_exit(answering, caf::exit_reason::user_shutdown);
    run();
  }

  /// Sends `ask n` for every n from one requester, each with its own `.then`.
  void ask(std::vector<int32_t> ns) {
    sys.spawn([this, ns, got = got](caf::event_based_actor* self) {
      for (auto n : ns)
        self->request(answering, 10s, ask_atom::value, n)
            .then([got, n](std::string& v) { got->values[n] = v; },
                  [got, n](caf::error& e) { got->errors[n] = to_failure(e); });
    });
    run();
  }
};

} // namespace

TEST_F(caf_bridge_test, a_taken_over_request_gets_nothing_until_answered) {
  ask({1});
  ASSERT_EQ(taken->size(), 1u);
  // The promise the handler returned is gone undelivered: CAF 0.17 sends nothing then (a
  // CAF that sent broken_promise would fail every control-plane call here).
  EXPECT_EQ(got->total(), 0u);
  caf_bridge::reply_from_any_thread(std::move(taken->at(0).second), std::string{"one"});
  run();
  ASSERT_EQ(got->total(), 1u);
  EXPECT_EQ(got->values[1], "one");
}

TEST_F(caf_bridge_test, each_answer_completes_the_request_it_was_taken_from) {
  ask({1, 2, 3});
  ASSERT_EQ(taken->size(), 3u);
  // Answered out of order; one of them with an error.
  caf_bridge::reply_from_any_thread(std::move(taken->at(2).second), std::string{"three"});
  caf_bridge::reply_from_any_thread(std::move(taken->at(0).second),
                                    make_error(ec::not_found, "no such thing"));
  caf_bridge::reply_from_any_thread(std::move(taken->at(1).second), std::string{"two"});
  run();
  ASSERT_EQ(got->total(), 3u);
  EXPECT_EQ(got->values[2], "two");
  EXPECT_EQ(got->values[3], "three");
  ASSERT_EQ(got->errors.count(1), 1u);
  EXPECT_EQ(got->errors[1].code, ec::not_found);
  EXPECT_EQ(got->errors[1].message, "no such thing");
  // The answers settled the requests: their timeouts fire into nothing.
  advance(20s);
  EXPECT_EQ(got->total(), 3u);
}

TEST_F(caf_bridge_test, an_unanswered_request_still_times_out) {
  ask({7});
  advance(11s);
  ASSERT_EQ(got->errors.count(7), 1u);
  EXPECT_TRUE(got->values.empty());
  // A late answer after the timeout is dropped, not delivered to a handler twice.
  caf_bridge::reply_from_any_thread(std::move(taken->at(0).second), std::string{"late"});
  run();
  EXPECT_TRUE(got->values.empty());
  EXPECT_EQ(got->total(), 1u);
}

TEST(caf_bridge, an_answer_from_another_thread_reaches_a_blocking_requester) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto taken = std::make_shared<taken_list>();
  std::promise<void> was_taken;
  auto answering = sys.spawn(answerer, taken, [&was_taken] { was_taken.set_value(); });
  std::thread replier{[&] {
    was_taken.get_future().wait();
    caf_bridge::reply_from_any_thread(std::move(taken->at(0).second), std::string{"hi"});
  }};
  caf::scoped_actor self{sys};
  std::optional<std::string> value;
  std::optional<caf::error> error;
  self->request(answering, 30s, ask_atom::value, int32_t{1})
      .receive([&](std::string& v) { value = v; }, [&](caf::error& e) { error = e; });
  replier.join();
  EXPECT_FALSE(error) << (error ? caf::to_string(*error) : "");
  EXPECT_EQ(value, std::optional<std::string>{"hi"});
  caf::anon_send_exit(answering, caf::exit_reason::user_shutdown);
}

// -- shared messages ------------------------------------------------------------------------

namespace {

/// A value that counts how often it is copied.
struct counted {
  static inline std::atomic<int> copies{0};
  int32_t value = 0;

  counted() = default;
  explicit counted(int32_t v)
      : value(v) {}
  counted(const counted& other)
      : value(other.value) {
    ++copies;
  }
  counted(counted&&) noexcept = default;
  counted& operator=(const counted& other) {
    value = other.value;
    ++copies;
    return *this;
  }
  counted& operator=(counted&&) noexcept = default;
  friend bool operator==(const counted& a, const counted& b) { return a.value == b.value; }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, counted& x) {
  return f(x.value);
}

using reader_actor = caf::typed_actor<caf::reacts_to<counted>>;

/// Reads the shared value by const reference and records what it saw.
reader_actor::behavior_type reader(reader_actor::pointer,
                                   std::shared_ptr<std::vector<int32_t>> seen) {
  return {[seen](const counted& c) { seen->push_back(c.value); }};
}

/// Sends one shared message to every reader.
using fan_actor = caf::typed_actor<caf::reacts_to<int32_t>>;

fan_actor::behavior_type fan(fan_actor::pointer self, std::vector<reader_actor> readers) {
  return {[self, readers](int32_t v) {
    caf_bridge::shared_message<counted> msg{counted{v}};
    for (auto& r : readers)
      caf_bridge::enqueue_shared(self, r, msg);
  }};
}

class caf_bridge_fanout : public deterministic {};

} // namespace

TEST_F(caf_bridge_fanout, a_shared_message_reaches_every_receiver_without_a_copy) {
  constexpr int receivers = 8;
  auto seen = std::make_shared<std::vector<int32_t>>();
  std::vector<reader_actor> readers;
  for (int i = 0; i < receivers; ++i)
    readers.push_back(sys.spawn(reader, seen));
  auto sender = sys.spawn(fan, readers);
  run();
  counted::copies = 0;
  caf::anon_send(sender, int32_t{42});
  run();
  EXPECT_EQ(*seen, std::vector<int32_t>(receivers, 42));
  EXPECT_EQ(counted::copies.load(), 0) << "the fan-out copied the value";
  caf::anon_send_exit(sender, caf::exit_reason::user_shutdown);
  for (auto& r : readers)
    caf::anon_send_exit(r, caf::exit_reason::user_shutdown);
  run();
}
