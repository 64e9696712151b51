#pragma once

#include "messages/component.hpp"
#include "messages/error.hpp"
#include "messages/json.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// Bodies of the bridge's HTTP API (bridge/API.md) that are not messages of their own: the
/// sandbox-backend and component calls, their answers, and the error body every route uses.
namespace guestflow {

/// POST /v1/sandbox/run. Omitted settings take the server's LANGFLOW_SANDBOX_* values, so
/// a plugin may send Langflow's settings or leave them to the node.
struct sandbox_call {
  std::string code;
  std::map<std::string, std::string> env;
  std::optional<uint32_t> timeout_seconds;
  std::optional<uint64_t> memory_mb;
  std::optional<bool> allow_network;
  std::optional<std::vector<std::string>> allowed_domains;
  /// "namespaces" | "gvisor" (the plugin's GUESTFLOW_ISOLATION); absent: the node's.
  std::optional<std::string> isolation;
};

template<>
result<sandbox_call> decode<sandbox_call>(std::string_view, const decode_limits&);

/// POST /v1/components/run: a Python `program` or a command (`cmd` + `args`), exactly one.
struct component_call {
  std::string flow_id;
  std::string component_id;
  bool reuse = false; ///< wire "reuse": "flow" | "none" (default)
  std::optional<bool> allow_network;
  std::optional<uint32_t> timeout_seconds;
  std::optional<uint64_t> memory_mb;
  std::optional<std::string> program;
  std::vector<std::string> argv; ///< cmd, then args
  bool return_files = false;
};

template<>
result<component_call> decode<component_call>(std::string_view, const decode_limits&);

/// The component call's answer: the run's result, how its exit is classed, the guest
/// (a reusable one keeps its name across runs), and the returned files (base64).
struct component_answer {
  sandbox_result result;
  std::optional<ec> outcome; ///< wire "outcome": "ok" when unset
  std::string guest;         ///< the guest's name
  bool reusable = false;     ///< kept for the next run of this component (reuse "flow")
  bool reused = false;       ///< an earlier run's guest was adopted (not created for this run)
  std::optional<returned_files> files;
};

std::string encode(const component_answer& x);

/// `{"error":{"code","message"}}`, with `run_id` beside it when the failure is a run's.
std::string encode_error(const failure& f, std::string_view run_id = {});

/// The provider's capabilities as GET /v1/capabilities reports them (`provider` added).
std::string encode_capabilities(const capabilities& caps, std::string_view provider);

/// POST /v1/runs with stream:false: `{"run_id","outputs":[RunOutputs],"executor","ok",
/// "failed"?:[ids]}` from the run's `complete` event.
std::string encode_run_answer(std::string_view run_id, const run_event& complete);

/// DELETE /v1/runs/{id}: `{"run_id","cancelled"}`.
std::string encode_cancel_answer(std::string_view run_id, bool cancelled);

} // namespace guestflow
