#include "actors/ask.hpp"
#include "actors/guest_names.hpp"
#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/sessions.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "common/numbers.hpp"
#include "controlplane/client/createos_ingress.hpp"
#include "messages/session.hpp"

#include <chrono>
#include <ctime>

namespace guestflow::bridge {

namespace {

using namespace std::chrono_literals;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rfc3339(int64_t t) {
  auto tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Where the URL points: GUESTFLOW_PUBLIC_URL, else the server as this caller reached it.
std::string base_url(exchange& ex, const server_context& ctx) {
  auto base = ctx.opts.public_url;
  if (base.empty()) base = "http://" + ex.header("Host");
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  return base;
}

/// A service URL for `port` of guest `guest_id`, valid for `ttl` seconds.
port_url sign_url(exchange& ex, server_context& ctx, const std::string& guest_id, uint16_t port,
                  uint32_t ttl) {
  port_grant g{guest_id, port, unix_now() + ttl};
  return {base_url(ex, ctx) + "/v1/ports/" + ctx.ports.sign(g) + "/", rfc3339(g.expires_at)};
}

bool on_createos(const server_context& ctx) {
  return ctx.svc.provider_name() == "createos";
}

/// The URL's lifetime the body asks for (an empty body: the server's), within the server's.
/// On CreateOS none can be asked for: its URLs do not expire, and a shorter life is not
/// quietly dropped.
result<uint32_t> ttl_of(exchange& ex, const server_context& ctx) {
  auto most = static_cast<uint32_t>(ctx.opts.port_url_ttl.count());
  auto body = ex.take_body();
  if (body.empty()) return most;
  auto req = decode<port_url_request>(body, ex.body_limits());
  if (!req) return req.error();
  if (!req->ttl_seconds) return most;
  if (on_createos(ctx))
    return fail(ec::bad_request,
                "ttl_seconds: CreateOS's service URLs do not expire (they live as long as the "
                "guest); ask without ttl_seconds");
  if (*req->ttl_seconds > most)
    return fail(ec::bad_request, "ttl_seconds: " + std::to_string(*req->ttl_seconds) +
                                     " is more than this server gives, " +
                                     std::to_string(most) +
                                     " (GUESTFLOW_PORT_URL_TTL_SECONDS)");
  return *req->ttl_seconds;
}

/// CreateOS's own URL for `port` of guest `guest_id`, read from its view: CreateOS's ingress
/// reaches the guest itself, so serve neither signs nor forwards it, and it does not expire
/// (`expires_at` null) while the guest and its ingress live.
void answer_createos_url(exchange& ex, server_context& ctx, const std::string& guest_id,
                         uint16_t port) {
  ctx.svc.guest_view(guest_id,
                     ex.then<sandbox_view>([port](exchange& ex, result<sandbox_view> v) {
                       if (!v) return ex.refuse(v.error());
                       auto url = cp::createos_preview_url(*v, port);
                       if (!url) return ex.refuse(url.error());
                       ex.respond(200, encode(port_url{std::move(*url), std::nullopt}));
                     }));
}

/// The URL for the guest `guest_id` once known (a failure answered as it is).
std::function<void(exchange&, result<std::string>)> answer_url(server_context& ctx,
                                                               uint16_t port, uint32_t ttl) {
  return [&ctx, port, ttl](exchange& ex, result<std::string> guest_id) {
    if (!guest_id) return ex.refuse(guest_id.error());
    if (on_createos(ctx)) return answer_createos_url(ex, ctx, *guest_id, port);
    if (!token_safe_id(*guest_id))
      return ex.refuse(fail(ec::unavailable,
                            "guest id '" + *guest_id + "' cannot be carried in a service URL"));
    ex.respond(200, encode(sign_url(ex, ctx, *guest_id, port, ttl)));
  };
}

/// On CreateOS without GUESTFLOW_CREATEOS_PUBLIC_INGRESS no guest was created with ingress
/// (its URLs would be public): refused before CreateOS is asked anything.
std::optional<failure> ingress_off(const server_context& ctx) {
  const auto& cfg = ctx.svc.config();
  if (policy::ingress_allowed(cfg.defaults, cfg.provider)) return std::nullopt;
  return failure{ec::unavailable,
                 "public ingress is off: CreateOS's service URLs are public (no "
                 "authentication), so its guests are created without ingress; set "
                 "GUESTFLOW_CREATEOS_PUBLIC_INGRESS=true on serve to turn it on"};
}

/// What both routes check first: public ingress, the port and the body's ttl.
result<std::pair<uint16_t, uint32_t>> port_and_ttl(exchange& ex, server_context& ctx) {
  if (auto off = ingress_off(ctx)) return *off;
  auto port = parse_uint_as<uint16_t>(ex.params().path("port"), 1);
  if (!port) return fail(ec::bad_request, "port: expected an integer in 1..65535");
  auto ttl = ttl_of(ex, ctx);
  if (!ttl) return ttl.error();
  return std::make_pair(*port, *ttl);
}

/// POST /v1/components/{guest}/ports/{port}: `guest` is a reusable component guest's name
/// (a `reuse: "flow"` run's answer), found on the control plane (any node of a fleet).
void component_port(exchange& ex, server_context& ctx) {
  auto name = std::string{ex.params().path("guest")};
  if (!names::is_reusable(name))
    return ex.refuse(fail(ec::bad_request, "guest: '" + name +
                                               "' is not a reusable component guest's name "
                                               "(a reuse: \"flow\" run's `guest`)"));
  auto what = port_and_ttl(ex, ctx);
  if (!what) return ex.refuse(what.error());
  ctx.svc.guest_named(name, ex.then<std::string>(answer_url(ctx, what->first, what->second)));
}

void session_port(exchange& ex, server_context& ctx) {
  auto g = ctx.opts.sessions;
  if (!g) return ex.refuse(failure{ec::unavailable, "sessions are not served by this server"});
  auto what = port_and_ttl(ex, ctx);
  if (!what) return ex.refuse(what.error());
  auto then = answer_url(ctx, what->first, what->second);
  ask_for<session_info>(g->sys, g->manager, caf::duration{30s},
                        ex.then<session_info>([then](exchange& ex, result<session_info> r) {
                          if (!r) return then(ex, r.error());
                          then(ex, r->guest_id);
                        }),
                        get_atom::value, std::string{ex.params().path("id")});
}

} // namespace

void add_port_routes(route_table& t) {
  t.add("POST", "/v1/sessions/{id}/ports/{port}", endpoint::ports, session_port)
      .max_body_bytes = 4096;
  t.add("POST", "/v1/components/{guest}/ports/{port}", endpoint::ports, component_port)
      .max_body_bytes = 4096;
}

} // namespace guestflow::bridge
