#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <memory>
#include <optional>
#include <string>

namespace guestflow {

/// Where a relay hands one run's events: the bridge's connection implements it
/// (bridge/server), so the relay knows nothing of the transport.
class run_event_sink {
public:
  virtual ~run_event_sink() = default;

  /// One event, called on the relay's thread: `line` is its NDJSON line (with the '\n')
  /// when the relay encodes, else empty; `terminal` holds the event when it is the run's
  /// last. Must not block: hop onto the sink's own thread.
  virtual void deliver(std::string line, std::optional<run_event> terminal) = 0;
};

struct run_relay_state {
  static inline const char* name = "run_relay";
  std::weak_ptr<run_event_sink> sink; ///< weak: the relay never keeps a connection alive
  bool lines = false; ///< encode each event (a streamed answer); else deliver the terminal only
};

/// The bridge's relay (see actors.hpp): encodes each event on this actor's thread when
/// `lines` is set (so the I/O thread only writes) and delivers it to `sink` (without
/// `lines`, a collected answer, the terminal event only); quits after
/// the terminal event, or with user_shutdown at the first event after `sink` is gone.
run_relay_actor::behavior_type
run_relay(run_relay_actor::stateful_pointer<run_relay_state> self,
          std::weak_ptr<run_event_sink> sink, bool lines);

} // namespace guestflow
