#include "actors/line_relay.hpp"

#include <caf/exit_reason.hpp>

namespace guestflow {

line_relay_actor::behavior_type
line_relay(line_relay_actor::stateful_pointer<line_relay_state> self,
           std::weak_ptr<line_sink> sink) {
  self->state.sink = std::move(sink);
  auto sink_or_quit = [self]() -> std::shared_ptr<line_sink> {
    auto s = self->state.sink.lock();
    if (!s) self->quit(caf::exit_reason::user_shutdown);
    return s;
  };
  return {
      [sink_or_quit](open_atom) {
        if (auto s = sink_or_quit()) s->open_lines();
      },
      [self, sink_or_quit](std::string& line, bool last) {
        auto s = sink_or_quit();
        if (!s) return;
        s->deliver_line(std::move(line), last);
        if (last) self->quit();
      },
  };
}

line_relay_actor::behavior_type line_discard(line_relay_actor::pointer self) {
  return {
      [](open_atom) {},
      [self](std::string&, bool last) {
        if (last) self->quit();
      },
  };
}

} // namespace guestflow
