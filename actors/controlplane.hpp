#pragma once

#include "actors/actors.hpp"
#include "controlplane/client/client.hpp"

#include <caf/stateful_actor.hpp>
#include <functional>
#include <memory>
#include <unordered_map>

namespace guestflow {

/// Deadlines of the calls the runtime makes (host-side backstops, not guest limits).
struct controlplane_timeouts {
  cp::millis create{120'000};
  cp::millis query{30'000}; ///< get, list, egress, resume
  cp::millis files{120'000};
  cp::millis remove{60'000};
};

struct controlplane_state {
  static inline const char* name = "controlplane";
  std::shared_ptr<cp::client> client;
  controlplane_timeouts timeouts;
  uint64_t next_call = 0;
  /// Stream completions waiting for their client callback, by call id (run on the actor
  /// only: they also drop the stream's entry below). Every other call is answered by its
  /// client callback directly.
  std::unordered_map<uint64_t, std::function<void(caf::message&)>> pending;
  /// Open streamed execs, by the sink they feed.
  std::unordered_map<caf::actor_addr, std::shared_ptr<cp::stream_handle>> streams;
};

/// Wraps the asynchronous client: each handler starts a client call whose completion
/// answers the caller's request straight from the client thread (one mailbox element, no
/// hop through this actor); a streamed exec's completion comes back to this actor as a
/// `done` message first, because its bookkeeping (`streams`) lives here.
controlplane_actor::behavior_type
controlplane(controlplane_actor::stateful_pointer<controlplane_state> self,
             std::shared_ptr<cp::client> client, controlplane_timeouts timeouts);

} // namespace guestflow
