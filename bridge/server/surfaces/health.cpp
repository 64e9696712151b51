#include "bridge/server/exchange.hpp"
#include "bridge/server/surfaces/surfaces.hpp"

namespace guestflow::bridge {

void add_health_routes(route_table& t) {
  t.add("GET", "/healthz", endpoint::healthz, [](exchange& ex, server_context&) {
     ex.respond(200, R"({"status":"ok"})");
   }).open = true;
}

} // namespace guestflow::bridge
