#include "actors/sandbox_policy.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"

#include <algorithm>

namespace guestflow::policy {
namespace {

/// The value with blanks trimmed; nullopt when unset or blank.
std::optional<std::string> lookup(const env_map& env, const char* key) {
  auto i = env.find(key);
  if (i == env.end() || trim(i->second).empty()) return std::nullopt;
  return std::string{trim(i->second)};
}

template<class T>
std::optional<failure> read_uint(const env_map& env, const char* key, T& out, T min, T max) {
  auto v = env_uint(env, key, min, max);
  if (!v) return v.error();
  if (*v) out = static_cast<T>(**v);
  return std::nullopt;
}

std::optional<failure> read_bool(const env_map& env, const char* key, bool& out) {
  auto v = lookup(env, key);
  if (!v) return std::nullopt;
  auto b = parse_bool(*v);
  if (!b)
    return fail(ec::bad_request,
                std::string{key} + ": expected true or false, got '" + *v + "'");
  out = *b;
  return std::nullopt;
}

} // namespace

provider_info createos_provider() {
  return {cp::provider::createos, cp::createos_capabilities(), 4096, std::string{"devbox:1"}};
}

std::optional<bool> parse_bool(const std::string& text) {
  auto t = lower(trim(text));
  if (t == "true" || t == "1" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "0" || t == "no" || t == "off") return false;
  return std::nullopt;
}

result<std::optional<uint64_t>> env_uint(const env_map& env, const char* key, uint64_t min,
                                         uint64_t max) {
  auto v = lookup(env, key);
  if (!v) return std::optional<uint64_t>{};
  auto parsed = parse_uint(*v, min, max);
  if (!parsed) return fail(ec::bad_request, uint_refusal(key, *v, min, max));
  return std::optional<uint64_t>{*parsed};
}

result<sandbox_settings> settings_from_env(const env_map& env) {
  sandbox_settings s;
  if (auto e = read_uint<uint32_t>(env, "LANGFLOW_SANDBOX_TIMEOUT_SECONDS", s.timeout_seconds,
                                   1, 86'400))
    return *e;
  if (auto e = read_uint<uint64_t>(env, "LANGFLOW_SANDBOX_MEMORY_MB", s.memory_mb, 1,
                                   uint64_t{1} << 22))
    return *e;
  if (auto e = read_bool(env, "LANGFLOW_SANDBOX_ALLOW_NETWORK", s.allow_network)) return *e;
  if (auto e = read_bool(env, "LANGFLOW_SANDBOX_CREATEOS_ACCEPT_EGRESS_EXCEPTIONS",
                         s.accept_egress_exceptions))
    return *e;
  // Comma- or blank-separated, as Langflow reads it.
  if (auto v = lookup(env, "LANGFLOW_SANDBOX_ALLOWED_DOMAINS"))
    s.allowed_domains = split(*v, std::string{","} + std::string{blanks});
  if (auto e = read_bool(env, "GUESTFLOW_CREATEOS_PUBLIC_INGRESS", s.createos_public_ingress))
    return *e;
  if (auto v = lookup(env, "CREATEOS_SANDBOX_ROOTFS")) s.rootfs = *v;
  if (auto v = lookup(env, "GUESTFLOW_SHAPE")) s.pinned_shape = *v;
  if (auto v = lookup(env, "GUESTFLOW_ISOLATION")) s.isolation = *v;
  if (auto v = lookup(env, "CREATEOS_SANDBOX_SHAPE"); v && lower(*v) != "auto")
    s.pinned_shape = *v;
  return s;
}

result<egress_policy> admit(const sandbox_settings& s, const provider_info& p) {
  if (!s.allowed_domains.empty() && !p.caps.supports_domain_allowlist)
    return fail(ec::policy_refused,
                "LANGFLOW_SANDBOX_ALLOWED_DOMAINS is set, but this sandbox provider does not "
                "enforce hostname egress rules (CreateOS accepts and echoes them while "
                "restricting nothing), so the run is refused; use "
                "LANGFLOW_SANDBOX_ALLOW_NETWORK=false for a restricted network");
  if (s.timeout_seconds > p.caps.max_timeout_seconds)
    return fail(ec::policy_refused,
                "LANGFLOW_SANDBOX_TIMEOUT_SECONDS=" + std::to_string(s.timeout_seconds) +
                    " exceeds the provider's maximum of " +
                    std::to_string(p.caps.max_timeout_seconds) + " seconds");
  if (s.allow_network) return egress_policy::allow_all();
  if (!p.caps.supports_deny_all_egress)
    return fail(ec::policy_refused, "network is off, but this provider cannot deny egress");
  if (!p.caps.link_local_blocked && !s.accept_egress_exceptions)
    return fail(ec::policy_refused,
                "network is off, but this provider always allows 169.254.0.0/16 (the VM "
                "metadata service) even under deny-all; set "
                "LANGFLOW_SANDBOX_CREATEOS_ACCEPT_EGRESS_EXCEPTIONS=true to accept that hole");
  return egress_policy::deny_all();
}

result<shape> pick_shape(const shape_list& catalog, uint64_t memory_mb, uint64_t floor_mib,
                         const std::optional<std::string>& pinned) {
  if (pinned) {
    for (const auto& s : catalog.data)
      if (s.id == *pinned) return s;
    std::string known;
    for (const auto& s : catalog.data)
      known += (known.empty() ? "" : ", ") + s.id;
    return fail(ec::bad_request,
                "shape '" + *pinned + "' is not in the catalog (" + known + ")");
  }
  auto need = std::max(memory_mb, floor_mib);
  const shape* best = nullptr;
  for (const auto& s : catalog.data)
    if (s.mem_mib >= need && (!best || s.mem_mib < best->mem_mib ||
                              (s.mem_mib == best->mem_mib && s.vcpu < best->vcpu)))
      best = &s;
  if (!best)
    return fail(ec::capacity, "no shape in the catalog has " + std::to_string(need) +
                                  " MiB of memory or more");
  return *best;
}

result<placement> place(const sandbox_settings& s, const provider_info& p,
                        const shape_list& catalog) {
  auto egress = admit(s, p);
  if (!egress) return egress.error();
  auto sh = pick_shape(catalog, s.memory_mb, p.memory_floor_mib, s.pinned_shape);
  if (!sh) return sh.error();
  if (auto refused = isolation_refusal(s.isolation, p)) return std::move(*refused);
  return placement{std::move(*egress), std::move(*sh), s.rootfs ? s.rootfs : p.default_rootfs,
                   s.isolation};
}

std::optional<failure> isolation_refusal(const std::optional<std::string>& kind,
                                         const provider_info& p) {
  if (!kind) return std::nullopt;
  // A provider that lists no isolations (CreateOS) offers only the one it is.
  auto offered = p.caps.isolations;
  if (offered.empty()) offered.push_back(p.caps.isolation);
  if (std::find(offered.begin(), offered.end(), *kind) != offered.end()) return std::nullopt;
  std::string names;
  for (const auto& o : offered)
    names += (names.empty() ? "" : ", ") + o;
  return fail(ec::policy_refused, "GUESTFLOW_ISOLATION=" + *kind +
                                      " is not offered by this sandbox provider (it offers " +
                                      names + ")");
}

bool ingress_allowed(const sandbox_settings& s, const provider_info& p) {
  return p.kind != cp::provider::createos || s.createos_public_ingress;
}

bool default_local_guest(const sandbox_settings& s) {
  return !s.allow_network && !s.pinned_shape && s.memory_mb <= 256 &&
         (!s.rootfs || *s.rootfs == "debian:12") &&
         (!s.isolation || *s.isolation == "namespaces");
}

} // namespace guestflow::policy
