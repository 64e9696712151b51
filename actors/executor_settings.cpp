#include "actors/executor_settings.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "controlplane/client/endpoint_selection.hpp"

#include <algorithm>
#include <fstream>

namespace guestflow {
namespace {

/// One variable at a time; the first malformed one wins.
class env_reader {
public:
  explicit env_reader(const policy::env_map& env)
      : env_(env) {}

  /// The value with blanks trimmed, or nullopt when unset or blank.
  std::optional<std::string> text(const char* key) const {
    auto i = env_.find(key);
    if (i == env_.end()) return std::nullopt;
    auto v = trim(i->second);
    if (v.empty()) return std::nullopt;
    return std::string{v};
  }

  template<class T>
  void number(const char* key, T& out, T min, T max) {
    if (error) return;
    auto v = policy::env_uint(env_, key, min, max);
    if (!v)
      error = std::move(v).error();
    else if (*v)
      out = static_cast<T>(**v);
  }

  void flag(const char* key, bool& out) {
    auto v = text(key);
    if (!v || error) return;
    if (auto b = policy::parse_bool(*v))
      out = *b;
    else
      refuse(key, "expected true or false, got '" + *v + "'");
  }

  void refuse(const char* key, const std::string& why) {
    if (!error) error = fail(ec::bad_request, std::string{key} + ": " + why);
  }

  std::optional<failure> error;

private:
  const policy::env_map& env_;
};

} // namespace

host_limits read_host_limits() {
  host_limits out;
  std::ifstream in{"/proc/meminfo"};
  for (std::string line; std::getline(in, line);) {
    constexpr std::string_view key = "MemTotal:";
    if (line.compare(0, key.size(), key) != 0) continue;
    auto kib = parse_uint(
        trim(std::string_view{line}.substr(key.size(), line.find(" kB") - key.size())));
    if (kib) out.memory_budget_mib = *kib / 1024 * 8 / 10;
    break;
  }
  return out;
}

uint64_t default_max_inflight(const host_limits& host) {
  if (host.memory_budget_mib == 0) return 64;
  return std::clamp<uint64_t>(host.memory_budget_mib / slot_memory_mib, 2, 1024);
}

std::string default_executor_shape(const host_limits& host) {
  /// The local catalog's shapes, largest first (controlplane/local/service/shapes.cpp).
  static constexpr std::pair<const char*, uint64_t> ladder[] = {
      {"s-4vcpu-8gb", 8192}, {"s-2vcpu-4gb", 4096},  {"s-2vcpu-2gb", 2048},
      {"s-1vcpu-1gb", 1024}, {"s-1vcpu-512mb", 512}, {"s-1vcpu-256mb", 256}};
  if (host.memory_budget_mib == 0) return ladder[0].first;
  for (auto& [name, mib] : ladder)
    if (mib <= host.memory_budget_mib) return name;
  return ladder[std::size(ladder) - 1].first;
}

result<executor_settings> executor_settings_from_env(const policy::env_map& env,
                                                     const host_limits& host) {
  executor_settings s;
  env_reader r{env};
  // CreateOS guests are not on this host: its budget does not bound them.
  auto choice = cp::select_endpoint(env);
  auto remote_vms = choice && std::holds_alternative<cp::endpoint>(*choice) &&
                    std::get<cp::endpoint>(*choice).kind == cp::provider::createos;
  if (!remote_vms) s.shape = default_executor_shape(host);
  s.max_inflight = default_max_inflight(host);
  if (auto v = r.text("CREATEOS_EXECUTOR_SHAPE")) s.shape = *v;
  r.number<uint32_t>("CREATEOS_EXECUTOR_TIMEOUT_SECONDS", s.timeout_seconds, 1, 86'400);
  if (auto v = r.text("CREATEOS_EXECUTOR_EGRESS")) {
    auto policy = parse_egress(split(*v, ","), "CREATEOS_EXECUTOR_EGRESS");
    if (!policy) return policy.error(); // already names the variable
    s.egress = std::move(*policy);
  }
  if (auto v = r.text("CREATEOS_EXECUTOR_ROOTFS")) s.rootfs = *v;
  if (auto v = r.text("GUESTFLOW_ISOLATION")) s.isolation = *v;
  r.flag("CREATEOS_EXECUTOR_INSTALL_LFX", s.install_lfx);
  if (auto v = r.text("CREATEOS_EXECUTOR_PIP")) {
    s.pip = split(*v, ", \t");
    for (auto& p : s.pip)
      if (p.front() == '-' || p.find('\0') != std::string::npos)
        r.refuse("CREATEOS_EXECUTOR_PIP", "'" + p + "' is not a package requirement");
  }
  if (auto v = r.text("GUESTFLOW_RUNNER_EXECUTOR")) {
    if (is_executor_name(*v))
      s.executor = *v;
    else
      r.refuse("GUESTFLOW_RUNNER_EXECUTOR", "expected auto, core or lfx, got '" + *v + "'");
  }
  r.number<uint64_t>("GUESTFLOW_MAX_INFLIGHT", s.max_inflight, 1, uint64_t{1} << 32);
  r.number<uint64_t>("GUESTFLOW_MAX_QUEUED", s.max_queued, 0, uint64_t{1} << 32);
  uint64_t retention_mb = s.retention_bytes >> 20;
  r.number<uint64_t>("GUESTFLOW_RUN_RETENTION_MB", retention_mb, 0, uint64_t{1} << 20);
  s.retention_bytes = retention_mb << 20;
  if (r.error) return *r.error;
  return s;
}

result<executor_settings> executor_settings_from_env(const policy::env_map& env) {
  return executor_settings_from_env(env, read_host_limits());
}

} // namespace guestflow
