#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"

namespace guestflow::bridge {

void add_sandbox_routes(route_table& t) {
  t.add("POST", "/v1/sandbox/run", endpoint::sandbox_run,
        [](exchange& ex, server_context& ctx) {
          auto call = decode<sandbox_call>(ex.take_body(), ex.body_limits());
          if (!call) return ex.refuse(call.error());
          ctx.svc.sandbox_run(
              *call, ex.then<sandbox_result>([](exchange& ex, result<sandbox_result> r) {
                if (!r) return ex.refuse(r.error());
                ex.respond(200, encode(*r));
              }));
        });
}

} // namespace guestflow::bridge
