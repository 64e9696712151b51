#pragma once

#include "actors/execution.hpp"
#include "actors/sandbox_policy.hpp"
#include "messages/execution.hpp"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

/// The component surface's spec builder (Langflow's CreateOS Sandbox component): a
/// command or Python program run in a guest that may survive across runs, with files
/// handed back. Nothing here talks to the control plane.
namespace guestflow {

/// Guest Reuse: `none` (the default) runs in a fresh ephemeral guest that is deleted
/// afterwards; `flow` adopts the one guest of (flow id, component id, network policy).
enum class reuse_mode : uint8_t { none, flow };

/// "none" | "flow"; nullopt for anything else.
std::optional<reuse_mode> parse_reuse(std::string_view text);

struct component_request {
  std::string flow_id;
  std::string component_id;
  reuse_mode reuse = reuse_mode::none;
  std::optional<std::string> python; ///< a Python program (uploaded, run with python3) …
  std::vector<std::string> argv;     ///< … or a command run as is (exactly one of the two)
  bool return_files = false;         ///< hand back /workspace/artifacts
};

/// What one component run needs: the execution spec and the options its execution actor
/// is spawned with (registry/lifecycle handles are the caller's to fill in when reusable).
struct component_plan {
  execution_spec spec;
  bool reusable = false;
  std::optional<collect_options> collect;
};

/// Builds the run or refuses it (bad_request for bad input, the policy gate's refusals).
/// - name: reuse flow → names::reusable(flow, component, fingerprint(egress)) — the egress
///   the policy gate chose is part of the identity; reuse none → an ephemeral `gf-b-`
///   name of `owner`, exactly like the sandbox backend's guests, so the reaper owns it.
/// - auto_pause_after_seconds: reusable → reusable_auto_pause (just above the timeout: a
///   guest idle between runs pauses soon and is resumed by the next run); ephemeral →
///   backstop_auto_pause.
/// - the program: `--python` → /workspace/main_<hex>.py under `timeout --kill-after=5 N
///   python3`; a command → as is under timeout(1). With return_files, /workspace/artifacts
///   is emptied and created first (each run returns only what it wrote), through
///   `/bin/sh -c '…; exec "$@"'` so timeout(1)'s exit status stays the run's.
result<component_plan> make_component_spec(const component_request& req,
                                           const policy::sandbox_settings& s,
                                           const policy::provider_info& provider,
                                           const shape_list& catalog, std::string_view owner,
                                           uint64_t artifact_cap_bytes, std::mt19937_64& rng);

/// max(60, timeout + 60), capped at the wire maximum of 86400.
uint32_t reusable_auto_pause(uint32_t timeout_seconds);

/// GUESTFLOW_ARTIFACT_CAP_BYTES (default 5 MiB when unset or blank, 1 byte … 1 GiB);
/// bad_request naming it if malformed (policy::env_uint's rule).
result<uint64_t> artifact_cap_from_env(const policy::env_map& env);

} // namespace guestflow
