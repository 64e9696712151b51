#include "actors/run_relay.hpp"

#include <caf/exit_reason.hpp>
#include <type_traits>

namespace guestflow {

static_assert(std::is_same_v<run_relay_actor, run_subscriber_actor>,
              "a relay is subscribed to runs as it is");

run_relay_actor::behavior_type
run_relay(run_relay_actor::stateful_pointer<run_relay_state> self,
          std::weak_ptr<run_event_sink> sink, bool lines) {
  self->state.sink = std::move(sink);
  self->state.lines = lines;
  // Read-only: the run keeps each event's message in its log, so a mutable handler would
  // get a copy of every event; only the terminal one is copied, once, for the sink.
  return {[self](const run_event& e) {
    auto sink = self->state.sink.lock();
    if (!sink) {
      self->quit(caf::exit_reason::user_shutdown);
      return;
    }
    auto terminal = e.terminal();
    // A collected answer is the terminal event alone: the others need no hop to the sink.
    if (!terminal && !self->state.lines) return;
    std::string line;
    if (self->state.lines) {
      line = encode(e);
      line += '\n';
    }
    sink->deliver(std::move(line), terminal ? std::optional<run_event>{e} : std::nullopt);
    if (terminal) self->quit();
  }};
}

} // namespace guestflow
