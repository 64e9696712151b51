#include "bridge/server/surfaces/surfaces.hpp"

namespace guestflow::bridge {

const route_table& api_routes() {
  static const route_table table = [] {
    route_table t;
    add_run_routes(t);
    add_sandbox_routes(t);
    add_component_routes(t);
    add_capabilities_routes(t);
    add_health_routes(t);
    add_metrics_routes(t);
    add_session_routes(t);
    add_port_routes(t);
    return t;
  }();
  return table;
}

} // namespace guestflow::bridge
