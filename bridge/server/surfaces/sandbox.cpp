#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"

namespace guestflow::bridge {

void add_sandbox_routes(route_table& t) {
  auto& r = t.add(
      "POST", "/v1/sandbox/run", endpoint::sandbox_run, [](exchange& ex, server_context& ctx) {
        auto call = decode<sandbox_call>(ex.take_body(), ex.body_limits());
        if (!call) return ex.refuse(call.error());
        auto cancel = ctx.svc.sandbox_run(
            *call, ex.then<sandbox_result>([](exchange& ex, result<sandbox_result> r) {
              if (!r) return ex.refuse(r.error());
              ex.respond(200, encode(*r));
            }));
        // The caller holds the request open for the answer: a caller gone
        // wants none, and the guest goes at once.
        if (cancel) ex.on_disconnect(std::move(cancel));
      });
  r.max_body_bytes = call_body_cap;
  r.slots = slot_use::now;
}

} // namespace guestflow::bridge
