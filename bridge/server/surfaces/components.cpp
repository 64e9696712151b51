#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"

namespace guestflow::bridge {

void add_component_routes(route_table& t) {
  auto& r = t.add("POST", "/v1/components/run", endpoint::component_run,
                  [](exchange& ex, server_context& ctx) {
                    auto call = decode<component_call>(ex.take_body(), ex.body_limits());
                    if (!call) return ex.refuse(call.error());
                    auto cancel = ctx.svc.component_run(
                        *call,
                        ex.then<component_answer>([](exchange& ex, result<component_answer> r) {
                          if (!r) return ex.refuse(r.error());
                          ex.respond(200, encode(*r));
                        }));
                    // As the sandbox surface: a caller gone cancels the run.
                    if (cancel) ex.on_disconnect(std::move(cancel));
                  });
  r.max_body_bytes = call_body_cap;
  r.slots = slot_use::now;
}

} // namespace guestflow::bridge
