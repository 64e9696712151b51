#include "actors/code_spec.hpp"

#include "actors/exit_classifier.hpp"

#include <algorithm>

namespace guestflow {

std::string random_hex(std::mt19937_64& rng, int n) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < n; ++i)
    out.push_back(hex[rng() % 16]);
  return out;
}

uint32_t backstop_auto_pause(uint32_t timeout_seconds) {
  auto want = uint64_t{timeout_seconds} + 120;
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, 60, 86'400));
}

bool reserved_env_name(std::string_view name) {
  return name == "PATH" || name.rfind("LD_", 0) == 0;
}

result<execution_spec> make_code_spec(const code_request& req,
                                      const policy::sandbox_settings& s,
                                      const policy::provider_info& provider,
                                      const shape_list& catalog, std::string guest_name,
                                      std::mt19937_64& rng) {
  for (const auto& [key, value] : req.env) {
    if (key.empty() || key.find('=') != std::string::npos ||
        key.find('\0') != std::string::npos)
      return fail(ec::bad_request, "env: invalid variable name '" + key + "'");
    if (value.find('\0') != std::string::npos)
      return fail(ec::bad_request, "env." + key + ": value contains a NUL byte");
    if (reserved_env_name(key))
      return fail(ec::bad_request,
                  "env." + key +
                      ": reserved: the runtime's own wrapper (timeout(1), then python3) is "
                      "found through PATH and started by the dynamic loader, so PATH and "
                      "LD_* cannot be set by the caller");
  }
  auto where = policy::place(s, provider, catalog);
  if (!where) return where.error();
  auto path = "/workspace/main_" + random_hex(rng) + ".py";
  execution_spec spec;
  spec.name = guest_name;
  spec.create.shape = where->chosen.id;
  spec.create.rootfs = where->rootfs;
  spec.create.isolation = where->isolation;
  spec.create.name = std::move(guest_name);
  spec.create.egress = std::move(where->egress);
  spec.create.envs = req.env;
  spec.create.auto_pause_after_seconds = backstop_auto_pause(s.timeout_seconds);
  spec.uploads.push_back({path, req.code});
  spec.command = with_timeout(s.timeout_seconds, "python3", {path});
  spec.timeout_seconds = s.timeout_seconds;
  return spec;
}

} // namespace guestflow
