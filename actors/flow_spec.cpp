#include "actors/flow_spec.hpp"

#include "actors/code_spec.hpp"
#include "actors/exit_classifier.hpp"

#include <algorithm>

namespace guestflow {
namespace {

constexpr std::string_view run_dir = "/workspace/run/";

std::string in_run_dir(std::string_view name) {
  std::string out{run_dir};
  out.append(name.data(), name.size());
  return out;
}

} // namespace

result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets) {
  auto timeout = req.timeout_seconds.value_or(s.timeout_seconds);
  if (timeout == 0 || timeout > s.timeout_seconds)
    return fail(ec::bad_request, "timeout_seconds: " + std::to_string(timeout) +
                                     " exceeds the executor's limit of " +
                                     std::to_string(s.timeout_seconds) +
                                     " s (CREATEOS_EXECUTOR_TIMEOUT_SECONDS)");
  auto has_runner = std::any_of(assets.begin(), assets.end(),
                                [](const guest_asset& a) { return a.name == "runner.py"; });
  if (!has_runner)
    return fail(ec::unavailable, "this guestflow build embeds no guest/runner.py; rebuild "
                                 "with the guest runner in the source tree");
  guest_run_spec program;
  program.graph = req.graph.payload;
  program.inputs = in.inputs;
  program.outputs = req.outputs;
  program.runtime_options = in.runtime_options;
  program.install_lfx = s.install_lfx;
  program.pip = s.pip;

  execution_spec spec;
  spec.name = guest_name;
  spec.create.shape = s.shape;
  spec.create.rootfs = s.rootfs;
  spec.create.name = std::move(guest_name);
  spec.create.egress = s.egress;
  spec.create.envs["PYTHONUNBUFFERED"] = "1";
  spec.create.auto_pause_after_seconds = backstop_auto_pause(timeout);
  spec.uploads.push_back({in_run_dir("spec.json"), encode(program)});
  for (auto& a : assets)
    spec.uploads.push_back({in_run_dir(a.name), std::string{a.content}});
  spec.command =
      with_timeout(timeout, "python3", {in_run_dir("runner.py"), in_run_dir("spec.json")});
  spec.timeout_seconds = timeout;
  spec.stream = true;
  return spec;
}

} // namespace guestflow
