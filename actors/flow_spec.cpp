#include "actors/flow_spec.hpp"

#include "actors/code_spec.hpp"
#include "actors/exit_classifier.hpp"

#include <algorithm>
#include <optional>

namespace guestflow {
namespace {

constexpr std::string_view run_dir = "/workspace/run/";

std::string in_run_dir(std::string_view name) {
  std::string out{run_dir};
  out.append(name.data(), name.size());
  return out;
}

/// Langflow's output vertices: ChatOutput, TextOutput and DataOutput, by type or by the
/// prefix of their id (the rule the runner harvests by when no output is named).
bool is_output_vertex(const graph_node& n) {
  for (std::string_view t : {"ChatOutput", "TextOutput", "DataOutput"})
    if (n.type == t || n.id.rfind(std::string{t} + "-", 0) == 0) return true;
  return false;
}

/// Every requested output names a vertex by id or display name; otherwise the caller
/// learns which output vertices the flow has.
std::optional<failure> check_outputs(const flow_graph& g,
                                     const std::vector<std::string>& outs) {
  for (auto& want : outs) {
    auto hit = std::any_of(g.nodes.begin(), g.nodes.end(), [&](const graph_node& n) {
      return n.id == want || n.display_name == want;
    });
    if (hit) continue;
    std::string have;
    for (auto& n : g.nodes)
      if (is_output_vertex(n))
        have += (have.empty() ? "" : ", ") + n.id + " (" + n.display_name + ")";
    return fail(ec::bad_request,
                "outputs: " + quote_json(want) +
                    " matches no vertex id or display name; the flow's output vertices: " +
                    (have.empty() ? std::string{"none"} : have));
  }
  return std::nullopt;
}

} // namespace

/// Embedded guest files that are not the flow runner's (actors/session_task.cpp uploads it).
constexpr std::string_view session_tool = "session_files.py";

result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets) {
  auto timeout = req.timeout_seconds.value_or(s.timeout_seconds);
  if (timeout == 0 || timeout > s.timeout_seconds)
    return fail(ec::bad_request, "timeout_seconds: " + std::to_string(timeout) +
                                     " exceeds the executor's limit of " +
                                     std::to_string(s.timeout_seconds) +
                                     " s (CREATEOS_EXECUTOR_TIMEOUT_SECONDS)");
  if (auto bad = check_outputs(req.graph, req.outputs)) return std::move(*bad);
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
  program.executor = req.executor.value_or(s.executor);

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
    if (a.name != session_tool) // the sessions' file tool: 13 KB a flow's guest never runs
      spec.uploads.push_back({in_run_dir(a.name), shared_bytes::of_static(a.content)});
  spec.command =
      with_timeout(timeout, "python3", {in_run_dir("runner.py"), in_run_dir("spec.json")});
  spec.timeout_seconds = timeout;
  spec.stream = true;
  return spec;
}

} // namespace guestflow
