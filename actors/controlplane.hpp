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
  cp::millis query{30'000}; ///< get, list, egress, shapes, pause, resume
  cp::millis files{120'000};
  cp::millis remove{60'000};
};

struct controlplane_state {
  static inline const char* name = "controlplane";
  std::shared_ptr<cp::client> client;
  controlplane_timeouts timeouts;
  uint64_t next_call = 0;
  /// Completions waiting for their client callback, by call id (run on the actor only).
  std::unordered_map<uint64_t, std::function<void(caf::message&)>> pending;
  /// Open streamed execs, by the sink they feed.
  std::unordered_map<caf::actor_addr, std::shared_ptr<cp::stream_handle>> streams;
};

/// Wraps the asynchronous client: each handler starts a client call whose completion
/// comes back to this actor as a `done` message and fulfils the caller's promise.
controlplane_actor::behavior_type
controlplane(controlplane_actor::stateful_pointer<controlplane_state> self,
             std::shared_ptr<cp::client> client, controlplane_timeouts timeouts);

} // namespace guestflow
