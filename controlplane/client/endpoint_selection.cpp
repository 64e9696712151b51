#include "controlplane/client/endpoint_selection.hpp"

#include "common/text.hpp"
#include "controlplane/client/url.hpp"
#include "fleet/etcd_client.hpp"

extern char** environ;

namespace guestflow::cp {
namespace {

/// The value of `name` with surrounding blanks removed; empty when unset.
std::string setting(const env_map& env, const std::string& name) {
  auto i = env.find(name);
  if (i == env.end()) return {};
  return std::string{trim(i->second)};
}

result<endpoint_choice> checked(endpoint ep, const char* variable) {
  auto url = parse_base_url(ep.base_url);
  if (!url) return fail(ec::bad_request, std::string(variable) + ": " + url.error().message);
  if (!url->tls && !is_loopback_host(url->host))
    return fail(ec::policy_refused, std::string(variable) +
                                        ": plain http is only allowed to a loopback host; use "
                                        "https for " +
                                        url->host);
  return endpoint_choice{std::move(ep)};
}

} // namespace

std::string_view to_string(provider p) noexcept {
  return p == provider::createos ? "createos" : "local";
}

result<endpoint_choice> select_endpoint(const env_map& env) {
  auto fleet = setting(env, "GUESTFLOW_FLEET");
  auto url = setting(env, "GUESTFLOW_CONTROL_PLANE_URL");
  if (!fleet.empty()) {
    if (!url.empty())
      return fail(ec::bad_request, "GUESTFLOW_FLEET and GUESTFLOW_CONTROL_PLANE_URL are both "
                                   "set: the fleet's nodes come from etcd; unset one");
    if (auto eps = fleet::parse_etcd_url(fleet); !eps)
      return fail(ec::bad_request, "GUESTFLOW_FLEET: " + eps.error().message);
    endpoint ep;
    ep.base_url = fleet;
    ep.api_key = setting(env, "GUESTFLOW_CONTROL_PLANE_KEY");
    ep.kind = provider::local;
    return endpoint_choice{std::move(ep)};
  }
  if (!url.empty()) {
    endpoint ep;
    ep.base_url = url;
    ep.api_key = setting(env, "GUESTFLOW_CONTROL_PLANE_KEY");
    ep.kind = provider::local;
    if (url.find(',') == std::string::npos)
      return checked(std::move(ep), "GUESTFLOW_CONTROL_PLANE_URL");
    // A static fleet: every URL is checked as one alone would be.
    size_t count = 0;
    for (auto& one : split(url, ",")) {
      endpoint single = ep;
      single.base_url = std::string{trim(one)};
      if (single.base_url.empty()) continue;
      if (auto c = checked(std::move(single), "GUESTFLOW_CONTROL_PLANE_URL"); !c)
        return c.error();
      ++count;
    }
    if (count == 0) return fail(ec::bad_request, "GUESTFLOW_CONTROL_PLANE_URL: no URL");
    return endpoint_choice{std::move(ep)};
  }
  auto key = setting(env, "CREATEOS_SANDBOX_API_KEY");
  if (key.empty()) key = setting(env, "CREATEOS_API_KEY");
  if (!key.empty()) {
    endpoint ep;
    ep.base_url = setting(env, "CREATEOS_SANDBOX_BASE_URL");
    if (ep.base_url.empty()) ep.base_url = std::string(createos_default_url);
    ep.api_key = key;
    ep.kind = provider::createos;
    return checked(std::move(ep), "CREATEOS_SANDBOX_BASE_URL");
  }
  return endpoint_choice{embedded_endpoint{}};
}

capabilities createos_capabilities() {
  capabilities c;
  c.isolation = "hardware-virtualized";
  c.supports_deny_all_egress = true;
  c.supports_address_egress_rules = true;
  c.supports_domain_allowlist = false;
  c.link_local_blocked = false;
  c.max_timeout_seconds = 86400 - 120;
  return c;
}

env_map process_environment() {
  env_map env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos)
      env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

} // namespace guestflow::cp
