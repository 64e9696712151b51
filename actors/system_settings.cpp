#include "actors/system_settings.hpp"

#include "messages/type_ids.hpp"

#include <caf/atom.hpp>

namespace guestflow {

void apply_runtime_settings(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", 2);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  register_types(cfg);
}

} // namespace guestflow
