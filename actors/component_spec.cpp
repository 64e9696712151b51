#include "actors/component_spec.hpp"

#include "actors/code_spec.hpp"
#include "actors/exit_classifier.hpp"
#include "actors/guest_names.hpp"

#include <algorithm>

namespace guestflow {
namespace {

constexpr size_t max_id_bytes = 512;

std::optional<failure> check_id(const char* what, const std::string& v) {
  if (v.empty()) return fail(ec::bad_request, std::string{what} + " must not be empty");
  if (v.size() > max_id_bytes)
    return fail(ec::bad_request, std::string{what} + " is longer than " +
                                     std::to_string(max_id_bytes) + " bytes");
  if (v.find('\0') != std::string::npos)
    return fail(ec::bad_request, std::string{what} + " contains a NUL byte");
  return std::nullopt;
}

} // namespace

std::optional<reuse_mode> parse_reuse(std::string_view text) {
  if (text == "none") return reuse_mode::none;
  if (text == "flow") return reuse_mode::flow;
  return std::nullopt;
}

uint32_t reusable_auto_pause(uint32_t timeout_seconds) {
  auto want = uint64_t{timeout_seconds} + 60;
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, 60, 86'400));
}

result<uint64_t> artifact_cap_from_env(const policy::env_map& env) {
  auto cap = policy::env_uint(env, "GUESTFLOW_ARTIFACT_CAP_BYTES", 1, uint64_t{1} << 30);
  if (!cap) return cap.error();
  return cap->value_or(uint64_t{5} << 20);
}

result<component_plan> make_component_spec(const component_request& req,
                                           const policy::sandbox_settings& s,
                                           const policy::provider_info& provider,
                                           const shape_list& catalog, std::string_view owner,
                                           uint64_t artifact_cap_bytes, std::mt19937_64& rng) {
  if (auto e = check_id("flow id", req.flow_id)) return *e;
  if (auto e = check_id("component id", req.component_id)) return *e;
  if (req.python.has_value() == !req.argv.empty())
    return fail(ec::bad_request, "a component runs either a Python program or a command");
  for (const auto& a : req.argv)
    if (a.find('\0') != std::string::npos)
      return fail(ec::bad_request, "the command contains a NUL byte");
  if (!req.argv.empty() && req.argv[0].empty())
    return fail(ec::bad_request, "the command is empty");
  auto where = policy::place(s, provider, catalog);
  if (!where) return where.error();

  component_plan plan;
  plan.reusable = req.reuse == reuse_mode::flow;
  auto& spec = plan.spec;
  // The image is part of a reusable guest's identity too (a run on another image must not
  // adopt it); the provider's default adds nothing, so names made before images stay valid.
  auto identity = fingerprint(where->egress);
  if (where->rootfs && where->rootfs != provider.default_rootfs)
    identity += " image=" + *where->rootfs;
  spec.name = plan.reusable ? names::reusable(req.flow_id, req.component_id, identity)
                            : names::ephemeral(names::guest_kind::backend, owner, rng);
  spec.create.shape = where->chosen.id;
  spec.create.rootfs = where->rootfs;
  spec.create.isolation = where->isolation;
  spec.create.name = spec.name;
  spec.create.egress = std::move(where->egress);
  // A kept guest can serve ports through serve's service URLs (bridge/API.md); on CreateOS,
  // whose URLs are public, only when the operator opted in.
  spec.create.ingress_enabled = plan.reusable && policy::ingress_allowed(s, provider);
  spec.create.auto_pause_after_seconds = plan.reusable ? reusable_auto_pause(s.timeout_seconds)
                                                       : backstop_auto_pause(s.timeout_seconds);
  // On a local control plane a reusable guest is persistent: stopped when idle (memory
  // freed, workspace kept), started again by the next run's first call, kept across a
  // host reboot. CreateOS has no such guests: there it is paused, frozen in RAM.
  if (plan.reusable && provider.kind == cp::provider::local) {
    spec.create.persistent = true;
    spec.create.idle_ttl_seconds = spec.create.auto_pause_after_seconds;
    spec.create.auto_pause_after_seconds.reset();
  }
  spec.timeout_seconds = s.timeout_seconds;
  // Streamed: a cancelled run (SIGINT, a caller gone) kills the command in the guest, which
  // matters when the guest is kept.
  spec.stream = true;
  auto suffix = random_hex(rng);
  if (req.python) {
    auto path = "/workspace/main_" + suffix + ".py";
    spec.uploads.push_back({path, *req.python});
    spec.command = with_timeout(s.timeout_seconds, "python3", {path});
  } else {
    std::vector<std::string> rest(req.argv.begin() + 1, req.argv.end());
    spec.command = with_timeout(s.timeout_seconds, req.argv[0], std::move(rest));
  }
  if (req.return_files) {
    collect_options c;
    c.archive = "/workspace/.gf-artifacts-" + suffix + ".tar";
    c.cap_bytes = artifact_cap_bytes;
    exec_request wrapped;
    wrapped.cmd = "/bin/sh";
    wrapped.args = {"-c", "rm -rf -- " + c.dir + " && mkdir -p -- " + c.dir + " && exec \"$@\"",
                    "sh", spec.command.cmd};
    for (auto& a : spec.command.args)
      wrapped.args.push_back(std::move(a));
    spec.command = std::move(wrapped);
    plan.collect = std::move(c);
  }
  return plan;
}

} // namespace guestflow
