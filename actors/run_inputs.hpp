#pragma once

#include "messages/flow_run.hpp"

#include <string>
#include <vector>

namespace guestflow {

/// Caller inputs and runtime options as the guest runner gets them.
struct normalized_inputs {
  std::vector<run_input> inputs;
  raw_json runtime_options;         ///< the forwarded keys only, as an object (`{}` if none)
  std::string inputs_from;          ///< "inputs", "runtime_options.initial_inputs" or ""
  std::vector<std::string> dropped; ///< keys that cannot cross a process boundary
  std::vector<std::string> ignored; ///< unknown and `_`-prefixed keys
};

/// Normalizes a caller's inputs the way lfx's executor seam passes them: caller
/// inputs arrive as `runtime_options.initial_inputs` (Coordinator.stream passes
/// `inputs=[]`) or as `inputs`; both are accepted, whichever is non-empty, and when both
/// are given they must agree (otherwise bad_request: no silent choice). Each may be a
/// string, `{input_value, type?, session?, components?}` or a list of such objects.
/// `max_iterations` (integer ≥ 1), `config` (object), `reset_output_values` and
/// `fallback_to_env_vars` (booleans) are forwarded, `null` counting as absent;
/// `event_manager` cannot cross a process boundary and `session_id` crosses as the
/// request's own `session_id` (run_request): both are dropped here with a debug log;
/// unknown and `_`-prefixed keys are ignored.
class run_inputs {
public:
  static result<normalized_inputs> normalize(const raw_json& inputs,
                                             const raw_json& runtime_options);

  static constexpr const char* forwarded[] = {"max_iterations", "config", "reset_output_values",
                                              "fallback_to_env_vars"};
  static constexpr const char* dropped[] = {"event_manager", "session_id"};
};

} // namespace guestflow
