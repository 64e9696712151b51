// The CLI's two actors (actors/event_handoff, actors/sweep_waiter) on the deterministic
// scheduler: events reach the blocking thread in order, and the sweep waiter runs its
// continuation exactly once, on an answer or an error, then quits.

#include "actors/event_handoff.hpp"
#include "actors/sweep_waiter.hpp"
#include "deterministic.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

using namespace guestflow;
using namespace guestflow::test;

namespace {

class cli_actors : public deterministic {};

run_event numbered(uint64_t seq) {
  run_event e;
  e.seq = seq;
  e.type = run_event::kind::stdout_line;
  e.line = "line " + std::to_string(seq);
  return e;
}

} // namespace

TEST_F(cli_actors, event_handoff_queues_every_event_in_arrival_order) {
  auto queue = std::make_shared<run_event_queue>();
  run_subscriber_actor sub = sys.spawn(event_handoff, queue); // a subscriber like any other
  for (uint64_t i = 0; i < 5; ++i)
    caf::anon_send(sub, numbered(i));
  run();
  for (uint64_t i = 0; i < 5; ++i) {
    auto e = queue->pop();
    EXPECT_EQ(e.seq, i);
    EXPECT_EQ(e.line, "line " + std::to_string(i));
  }
  caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(cli_actors, sweep_waiter_continues_once_on_the_answer_and_quits) {
  int calls = 0;
  auto waiter = sys.spawn(sweep_waiter, [&calls] { ++calls; });
  run();
  EXPECT_EQ(calls, 0);
  bool down = false;
  auto watcher = sys.spawn([&down, waiter](caf::event_based_actor* self) -> caf::behavior {
    self->monitor(waiter);
    self->set_down_handler([&down, self](caf::down_msg&) {
      down = true;
      self->quit();
    });
    self->send(waiter, uint64_t{3});
    self->send(waiter, uint64_t{4}); // a second answer finds it gone
    return {[](int32_t) {}};
  });
  run();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(down);
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  run();
}

namespace {

/// A stand-in reaper for the sweep: answers with a count, or with an error.
using sweeper_actor = caf::typed_actor<caf::replies_to<sweep_atom, uint32_t>::with<uint64_t>>;

sweeper_actor::behavior_type sweeper(bool fail) {
  return {[fail](sweep_atom, uint32_t older_than) -> caf::result<uint64_t> {
    if (fail) return make_error(ec::unavailable, "the sweep's list failed");
    return uint64_t{older_than} + 1;
  }};
}

} // namespace

TEST_F(cli_actors, sweep_waiter_receives_the_answer_to_a_sweep_sent_in_its_name) {
  // The CLI's use: send_as(waiter, reaper, sweep_atom, grace); the answer goes to the waiter.
  for (bool fail : {false, true}) {
    auto reaper_like = sys.spawn(sweeper, fail);
    int calls = 0;
    auto waiter = sys.spawn(sweep_waiter, [&calls] { ++calls; });
    caf::send_as(waiter, reaper_like, sweep_atom::value, uint32_t{60});
    run();
    EXPECT_EQ(calls, 1) << (fail ? "an error answer" : "a count");
    caf::anon_send_exit(reaper_like, caf::exit_reason::user_shutdown);
    run();
  }
}
