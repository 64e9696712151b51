#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"

namespace guestflow::bridge {

void add_metrics_routes(route_table& t) {
  t.add("GET", "/metrics", endpoint::metrics, [](exchange& ex, server_context& ctx) {
    ctx.svc.stats(ex.then<runtime_stats>([&ctx](exchange& ex, result<runtime_stats> r) {
      if (!r) return ex.refuse(r.error());
      ex.respond(200, ctx.stats.render(*r, ctx.opts.cp_latency) + ctx.svc.fleet_metrics(),
                 "text/plain; version=0.0.4; charset=utf-8");
    }));
  });
}

} // namespace guestflow::bridge
