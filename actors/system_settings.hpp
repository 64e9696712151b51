#pragma once

#include <caf/actor_system_config.hpp>

namespace guestflow {

/// The actor-system settings of a process that hosts a runtime (the CLI, benches): two
/// scheduler threads, CAF's logger quiet, every message type registered, and the
/// work-sharing scheduler. The runtime's actors mostly wait for control-plane I/O; CAF's
/// default work-stealing workers poll (spin, then 50 µs sleeps) whenever they run dry,
/// which between bursts of completions cost more CPU than the actors' own work. Idle
/// work-sharing workers block on a condition variable instead.
void apply_runtime_settings(caf::actor_system_config& cfg);

} // namespace guestflow
