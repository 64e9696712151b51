#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <deque>
#include <string>
#include <unordered_map>

namespace guestflow {

struct guest_registry_options {
  std::chrono::seconds create_timeout{150}; ///< CAF-level backstop on the create
  std::chrono::seconds call_timeout{90};    ///< on every other call (incl. lifecycle)
};

struct guest_registry_state {
  static inline const char* name = "guest_registry";

  struct waiter {
    sandbox_create_request req;
    caf::typed_response_promise<reusable_guest> rp;
    caf::actor_addr who;
    bool abandoned = false; ///< died while its guest was being prepared
  };

  /// One reusable guest name: its FIFO of runs, the head being prepared or holding it.
  struct slot {
    std::deque<waiter> queue;
    bool active = false;  ///< the head is being prepared or holds the guest
    bool granted = false; ///< the head holds the guest
    std::string known_id; ///< last id seen under this name (a hint; verified by GET)
  };

  controlplane_actor cp;
  lifecycle_actor lifecycle;
  guest_registry_options opts;
  std::unordered_map<std::string, slot> slots; ///< by guest name
};

/// See guest_registry_actor (actors.hpp).
guest_registry_actor::behavior_type
guest_registry(guest_registry_actor::stateful_pointer<guest_registry_state> self,
               controlplane_actor cp, lifecycle_actor lifecycle, guest_registry_options opts);

/// Seconds a guest has been idle at `now_s` (Unix seconds): now − max(created_at,
/// last_resumed_at, paused_at, stopped_at, last_used_at); nullopt when no timestamp parses.
std::optional<int64_t> idle_seconds(const sandbox_view& v, int64_t now_s);

} // namespace guestflow
