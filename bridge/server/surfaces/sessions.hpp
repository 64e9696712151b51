#pragma once

#include "actors/actors.hpp"

#include <caf/actor_system.hpp>

namespace guestflow::bridge {

/// What the session routes reach: the session manager actor of the runtime (spawned by
/// `guestflow serve`). Absent from server_options: every /v1/sessions route is
/// `unavailable`.
struct session_gateway {
  caf::actor_system& sys;
  session_manager_actor manager;
};

} // namespace guestflow::bridge
