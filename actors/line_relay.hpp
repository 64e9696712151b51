#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <memory>
#include <string>

namespace guestflow {

/// Where a line relay hands one answer's NDJSON lines: the bridge's connection implements
/// it (bridge/server), so the relay knows nothing of the transport.
class line_sink {
public:
  virtual ~line_sink() = default;

  /// The work behind the answer started: its head goes out. Called on the relay's thread;
  /// must not block.
  virtual void open_lines() = 0;
  /// One line (without the '\n'); `last`: the answer ends after it. Called on the relay's
  /// thread; must not block.
  virtual void deliver_line(std::string line, bool last) = 0;
};

struct line_relay_state {
  static inline const char* name = "line_relay";
  std::weak_ptr<line_sink> sink; ///< weak: the relay never keeps a connection alive
};

/// The bridge's relay of a line-streamed answer (see actors.hpp): hands what it receives to
/// `sink`; quits after the last line, or with user_shutdown at the first message after
/// `sink` is gone — which the producer, monitoring it, sees as the client's disconnect.
line_relay_actor::behavior_type
line_relay(line_relay_actor::stateful_pointer<line_relay_state> self,
           std::weak_ptr<line_sink> sink);

/// A relay that takes the lines nowhere, for an answer given whole at the end (a buffered
/// session command): its producer monitors it all the same, so killing it when the caller
/// goes away stops the work. Quits after the last line.
line_relay_actor::behavior_type line_discard(line_relay_actor::pointer self);

} // namespace guestflow
