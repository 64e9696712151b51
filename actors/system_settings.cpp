#include "actors/system_settings.hpp"

#include "actors/batched_clock.hpp"
#include "messages/type_ids.hpp"

#include <algorithm>
#include <caf/atom.hpp>
#include <thread>

namespace guestflow {

size_t runtime_worker_threads() {
  size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<size_t>(cores - 1, 1, 8);
}

void apply_runtime_settings(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", runtime_worker_threads());
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  register_types(cfg);
  use_batched_clock(cfg);
}

} // namespace guestflow
