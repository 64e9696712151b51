#include "actors/flow_spec.hpp"

#include "actors/code_spec.hpp"
#include "actors/exit_classifier.hpp"
#include "controlplane/client/url.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

namespace guestflow {
namespace {

/// The run's one upload: in the workspace, the one place every control plane's files API
/// writes (a local guest's /tmp is in its own memory, where a PUT is refused); at its root,
/// so that the upload makes no directory (on a fresh ext4 a mkdir is the upload's dearest
/// step, and the directory's blocks would be written back at the exec's end).
constexpr std::string_view bundle_path = "/workspace/.run-bundle";
/// Where guest/unpack_run.py writes the runner's files and the run's own (spec.json,
/// variables.json): the guest's /tmp, in its memory, as the same files are in a process
/// without a guest. The unpacker unlinks the bundle before anything runs, and ext4 drops the
/// pages of an unlinked file not yet written back: the exec's end (sync_workspace) writes the
/// workspace's metadata back through the loop device, not the runner's files or the secrets.
constexpr std::string_view run_dir = "/tmp/run";

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

/// Appends one file to a run bundle: a header line "<size> <name>\n", then its bytes
/// (guest/unpack_run.py writes them back as files).
void add_to_bundle(std::string& bundle, std::string_view name, std::string_view bytes) {
  bundle += std::to_string(bytes.size());
  bundle += ' ';
  bundle.append(name.data(), name.size());
  bundle += '\n';
  bundle.append(bytes.data(), bytes.size());
}

} // namespace

/// Embedded guest files that are not the flow runner's (actors/session_task.cpp uploads it).
constexpr std::string_view session_tool = "session_files.py";
/// The guest program that unpacks a run bundle and starts the runner (`python3 -c` source).
constexpr std::string_view unpacker = "unpack_run.py";

shared_bytes flow_bundle_head(const std::vector<guest_asset>& assets, bool gzipped) {
  std::vector<std::pair<std::string, std::string_view>> files;
  for (auto& a : assets) {
    if (a.name == session_tool || a.name == unpacker) continue; // not run in a flow's guest
    if (!gzipped || a.gzipped.empty())
      files.emplace_back(std::string{a.name}, a.content);
    else
      files.emplace_back(std::string{a.name} + ".gz", a.gzipped);
  }
  std::string head;
  head.reserve(
      std::accumulate(files.begin(), files.end(), size_t{0}, [](size_t n, const auto& f) {
        return n + f.first.size() + f.second.size() + 24;
      }));
  for (auto& [name, bytes] : files)
    add_to_bundle(head, name, bytes);
  return head;
}

bool gzip_bundle_for(const cp::endpoint& ep) {
  if (ep.kind != cp::provider::local || ep.base_url.find(',') != std::string::npos) return true;
  auto url = cp::parse_base_url(ep.base_url); // a fleet's etcd:// is not one: gzipped
  return !url || (url->socket_path.empty() && !cp::is_loopback_host(url->host));
}

result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets) {
  return make_flow_spec(req, in, s, std::move(guest_name), assets, flow_bundle_head(assets));
}

result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets,
                                      const shared_bytes& bundle_head) {
  auto timeout = req.timeout_seconds.value_or(s.timeout_seconds);
  if (timeout == 0 || timeout > s.timeout_seconds)
    return fail(ec::bad_request, "timeout_seconds: " + std::to_string(timeout) +
                                     " exceeds the executor's limit of " +
                                     std::to_string(s.timeout_seconds) +
                                     " s (CREATEOS_EXECUTOR_TIMEOUT_SECONDS)");
  if (auto bad = check_outputs(req.graph, req.outputs)) return std::move(*bad);
  auto embedded = [&](std::string_view name) {
    return std::find_if(assets.begin(), assets.end(),
                        [&](const guest_asset& a) { return a.name == name; });
  };
  auto unpack = embedded(unpacker);
  for (std::string_view needed : {std::string_view{"runner.py"}, unpacker})
    if (embedded(needed) == assets.end())
      return fail(ec::unavailable, "this guestflow build embeds no guest/" +
                                       std::string{needed} +
                                       "; rebuild with the guest runner in the source tree");
  guest_run_spec program;
  program.graph = req.graph.payload;
  program.inputs = in.inputs;
  program.outputs = req.outputs;
  program.runtime_options = in.runtime_options;
  program.install_lfx = s.install_lfx;
  program.pip = s.pip;
  program.executor = req.executor.value_or(s.executor);
  program.session_id = req.session_id;
  program.user_id = req.user_id;
  program.context = req.context;
  program.tweaks = req.tweaks;
  program.history = req.history;

  execution_spec spec;
  spec.name = guest_name;
  spec.create.shape = s.shape;
  spec.create.rootfs = s.rootfs;
  spec.create.isolation = s.isolation;
  spec.create.name = std::move(guest_name);
  spec.create.egress = s.egress;
  spec.create.envs["PYTHONUNBUFFERED"] = "1";
  spec.create.auto_pause_after_seconds = backstop_auto_pause(timeout);
  // One upload instead of one per file (each is a control-plane round trip), the embedded
  // files gzipped: both are serve CPU per run. The embedded part is `bundle_head`, shared
  // by every run's upload; only spec.json (and variables.json) is this run's own. The
  // secrets are a file of their own, which the runner unlinks before anything else runs,
  // so that spec.json (which a flow's code can read) never holds them.
  auto program_json = encode(program);
  std::string own;
  own.reserve(program_json.size() + 32);
  add_to_bundle(own, "spec.json", program_json);
  if (!req.variables.empty())
    add_to_bundle(own, "variables.json", encode_variables(req.variables));
  spec.uploads.push_back(
      {std::string{bundle_path}, shared_bytes::joined(bundle_head, std::move(own))});
  spec.command = with_timeout(
      timeout, "python3",
      {"-c", std::string{unpack->content}, std::string{bundle_path}, std::string{run_dir}});
  spec.timeout_seconds = timeout;
  spec.stream = true;
  return spec;
}

} // namespace guestflow
