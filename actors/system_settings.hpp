#pragma once

#include <caf/actor_system_config.hpp>

namespace guestflow {

/// The actor-system settings of a process that hosts a runtime (the CLI, benches):
/// runtime_worker_threads() scheduler threads, CAF's logger quiet, every message type
/// registered, the work-sharing scheduler and the batched clock (actors/batched_clock.hpp). The
/// runtime's actors mostly wait for control-plane I/O; CAF's default work-stealing workers poll
/// (spin, then 50 µs sleeps) whenever they run dry, which between bursts of completions cost
/// more CPU than the actors' own work. Idle work-sharing workers block on a condition variable
/// instead.
void apply_runtime_settings(caf::actor_system_config& cfg);

/// One CAF worker per core but one, which the I/O threads (the control-plane client's, the
/// server's) keep busy; at least 1, at most 8. Each message between actors on different
/// workers can cost a wake-up: on 2 cores one worker spent 7-12% less CPU per run than two
/// (bench_runtime --caf-threads, code and flow runs at 100 to 10,000 in flight).
size_t runtime_worker_threads();

} // namespace guestflow
