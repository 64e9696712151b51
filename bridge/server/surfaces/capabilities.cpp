#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"

namespace guestflow::bridge {

void add_capabilities_routes(route_table& t) {
  t.add("GET", "/v1/capabilities", endpoint::capabilities,
        [](exchange& ex, server_context& ctx) {
          auto& svc = ctx.svc;
          ex.respond(200, encode_capabilities(svc.config().provider.caps, svc.provider_name()));
        });
}

} // namespace guestflow::bridge
