#pragma once

#include "actors/sandbox_policy.hpp"
#include "messages/egress.hpp"
#include "messages/error.hpp"
#include "messages/flow_run.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// The whole-flow executor's settings (Langflow's whole-flow executor seam) and the
/// coordinator's admission limits. Read from an environment map so that tests and the CLI
/// share one parser; actors never call getenv.
struct executor_settings {
  std::string shape = "s-4vcpu-8gb";                 ///< CREATEOS_EXECUTOR_SHAPE
  uint32_t timeout_seconds = 600;                    ///< CREATEOS_EXECUTOR_TIMEOUT_SECONDS
  egress_policy egress = egress_policy::allow_all(); ///< CREATEOS_EXECUTOR_EGRESS ("*")
  std::optional<std::string> rootfs;                 ///< CREATEOS_EXECUTOR_ROOTFS
  bool install_lfx = false;                          ///< CREATEOS_EXECUTOR_INSTALL_LFX
  std::vector<std::string> pip;                      ///< CREATEOS_EXECUTOR_PIP
  std::string executor = "auto";                     ///< GUESTFLOW_RUNNER_EXECUTOR
  uint64_t max_inflight = 10'000;                    ///< GUESTFLOW_MAX_INFLIGHT
  uint64_t max_queued = 10'000;                      ///< GUESTFLOW_MAX_QUEUED
};

/// Reads the settings. A malformed value is bad_request naming the variable, never a
/// silent default: a timeout outside 1..86400, an egress list with a hostname or with `*`
/// mixed in (parse_egress), a pip entry that looks like an option (`-…`, it would reach
/// pip's argv), GUESTFLOW_MAX_INFLIGHT of 0.
result<executor_settings> executor_settings_from_env(const policy::env_map& env);

} // namespace guestflow
