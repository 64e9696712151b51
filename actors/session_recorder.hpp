#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <string>

namespace guestflow {

struct session_recorder_state {
  static inline const char* name = "session_recorder";
  message_store_actor store;
  std::string session;
  run_subscriber_actor caller; ///< null once it went away
  bool cancel_on_disconnect = false;
};

/// A run subscriber (see actors.hpp) in front of the caller's (the bridge's relay, the
/// CLI's handoff), for a run whose memory is the message store's: each `message` event
/// goes to the store under `session` — before the caller gets it, so that a caller that
/// saw the run end and then asks the store to drain finds every message written — and
/// every event goes on to the caller in order. It is the run's only subscriber for the
/// caller, so the run must still see the caller go: with `cancel_on_disconnect` it quits
/// when the caller does (the run is cancelled as if the caller had been attached itself);
/// without, it goes on storing to the end of the run. Quits after the terminal event.
run_subscriber_actor::behavior_type
session_recorder(run_subscriber_actor::stateful_pointer<session_recorder_state> self,
                 message_store_actor store, std::string session, run_subscriber_actor caller,
                 bool cancel_on_disconnect);

} // namespace guestflow
