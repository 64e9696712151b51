// The bridge's relay actor (actors/run_relay.hpp) under CAF's deterministic scheduler: what
// it hands its sink, and when it quits.

#include "actors/run_relay.hpp"
#include "tests/unit/actors/deterministic.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

using namespace guestflow;
using namespace guestflow::test;

namespace {

/// Records every delivery.
struct recording_sink : run_event_sink {
  std::vector<std::pair<std::string, std::optional<run_event>>> got;
  void deliver(std::string line, std::optional<run_event> terminal) override {
    got.emplace_back(std::move(line), std::move(terminal));
  }
};

run_event event(run_event::kind type, uint64_t seq) {
  run_event e;
  e.run_id = "run-1";
  e.seq = seq;
  e.type = type;
  e.id = "v" + std::to_string(seq);
  e.name = "Vertex";
  if (type == run_event::kind::error) {
    e.code = ec::timeout;
    e.message = "too slow";
  }
  return e;
}

class relay_test : public deterministic {
protected:
  std::shared_ptr<recording_sink> sink = std::make_shared<recording_sink>();
  std::vector<caf::actor> watchers;

  void TearDown() override {
    for (auto& w : watchers)
      caf::anon_send_exit(w, caf::exit_reason::user_shutdown);
    run();
  }

  /// The exit reason of `a` once it is down (nullopt while it runs).
  std::shared_ptr<std::optional<caf::error>> watch(const run_relay_actor& a) {
    auto reason = std::make_shared<std::optional<caf::error>>();
    // Held: an actor nobody references is terminated as unreachable.
    watchers.push_back(sys.spawn([a, reason](caf::event_based_actor* self) -> caf::behavior {
      self->monitor(a);
      self->set_down_handler([self, reason](caf::down_msg& d) {
        *reason = d.reason;
        self->quit();
      });
      return {[](const std::string&) {}};
    }));
    run();
    return reason;
  }
};

} // namespace

TEST_F(relay_test, a_streaming_relay_encodes_each_event_and_quits_after_the_terminal_one) {
  auto relay = sys.spawn(run_relay, std::weak_ptr<run_event_sink>{sink}, true);
  auto down = watch(relay);
  auto started = event(run_event::kind::vertex_started, 0);
  auto failed = event(run_event::kind::error, 1);
  caf::anon_send(relay, started);
  caf::anon_send(relay, failed);
  run();
  ASSERT_EQ(sink->got.size(), 2u);
  EXPECT_EQ(sink->got[0].first, encode(started) + "\n");
  EXPECT_FALSE(sink->got[0].second);
  EXPECT_EQ(sink->got[1].first, encode(failed) + "\n");
  ASSERT_TRUE(sink->got[1].second);
  EXPECT_EQ(*sink->got[1].second, failed);
  ASSERT_TRUE(*down);
  EXPECT_EQ(**down, caf::exit_reason::normal);
  // Nothing after the terminal event reaches the sink.
  caf::anon_send(relay, event(run_event::kind::vertex_started, 2));
  run();
  EXPECT_EQ(sink->got.size(), 2u);
}

TEST_F(relay_test, a_collecting_relay_hands_over_the_terminal_event_alone_unencoded) {
  auto relay = sys.spawn(run_relay, std::weak_ptr<run_event_sink>{sink}, false);
  auto down = watch(relay);
  auto complete = event(run_event::kind::complete, 1);
  caf::anon_send(relay, event(run_event::kind::vertex_built, 0));
  run();
  EXPECT_TRUE(sink->got.empty()); // a collected answer needs no hop per event
  EXPECT_FALSE(*down);
  caf::anon_send(relay, complete);
  run();
  ASSERT_EQ(sink->got.size(), 1u);
  EXPECT_EQ(sink->got[0].first, "");
  ASSERT_TRUE(sink->got[0].second);
  EXPECT_EQ(*sink->got[0].second, complete);
  EXPECT_TRUE(*down);
}

TEST_F(relay_test, a_relay_whose_connection_is_gone_quits_as_a_disconnect) {
  auto relay = sys.spawn(run_relay, std::weak_ptr<run_event_sink>{sink}, true);
  auto down = watch(relay);
  caf::anon_send(relay, event(run_event::kind::vertex_started, 0));
  run();
  EXPECT_EQ(sink->got.size(), 1u);
  EXPECT_FALSE(*down); // still running: the run has not ended
  std::weak_ptr<recording_sink> gone = sink;
  sink.reset(); // the connection closes; the relay held it weakly only
  EXPECT_TRUE(gone.expired());
  caf::anon_send(relay, event(run_event::kind::vertex_started, 1));
  run();
  ASSERT_TRUE(*down);
  EXPECT_EQ(**down, caf::exit_reason::user_shutdown);
}
