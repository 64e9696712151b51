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

/// What bounds the executor's defaults on this host.
struct host_limits {
  /// The memory a control plane on this host lets its guests commit: 80% of MemTotal,
  /// as `guestflow control-plane --memory-budget-mb` defaults to (0: unknown, no bound).
  uint64_t memory_budget_mib = 0;
};

/// This host's limits, read from /proc/meminfo.
host_limits read_host_limits();

/// The whole-flow executor's settings (Langflow's whole-flow executor seam) and the
/// runtime's admission limits. Read from an environment map so that tests and the CLI
/// share one parser; actors never call getenv. The defaults fit the host: a run's guest no
/// larger than the host's memory budget, no egress unless configured, and as many runs in
/// flight as the budget holds guests of the smallest default size.
struct executor_settings {
  std::string shape = "s-4vcpu-8gb";                ///< CREATEOS_EXECUTOR_SHAPE
  uint32_t timeout_seconds = 600;                   ///< CREATEOS_EXECUTOR_TIMEOUT_SECONDS
  egress_policy egress = egress_policy::deny_all(); ///< CREATEOS_EXECUTOR_EGRESS
  std::optional<std::string> rootfs;                ///< CREATEOS_EXECUTOR_ROOTFS
  bool install_lfx = false;                         ///< CREATEOS_EXECUTOR_INSTALL_LFX
  std::vector<std::string> pip;                     ///< CREATEOS_EXECUTOR_PIP
  std::string executor = "auto";                    ///< GUESTFLOW_RUNNER_EXECUTOR
  /// GUESTFLOW_ISOLATION: the executor guest's kind ("namespaces" | "gvisor"), as for the
  /// sandbox surfaces; a kind the control plane does not offer is refused, never weakened.
  std::optional<std::string> isolation;
  /// GUESTFLOW_MAX_INFLIGHT: runs holding a guest at once, every surface together
  /// (flows, sandbox and component runs); default default_max_inflight(host).
  uint64_t max_inflight = 64;
  uint64_t max_queued = 0; ///< GUESTFLOW_MAX_QUEUED: whole-flow runs waiting for a slot
  /// GUESTFLOW_RUN_RETENTION_MB: the events ended flow runs keep for late joiners, all
  /// together, counted as their NDJSON (as each run's own replay cap is): past it the oldest
  /// ended runs go before their retention period is over. Resident memory is ~4-5× this
  /// (each event held as a struct, the run's actor around it).
  uint64_t retention_bytes = uint64_t{64} << 20;
};

/// The guest memory one default slot stands for: the sandbox surface's default guest.
inline constexpr uint64_t slot_memory_mib = 256;

/// GUESTFLOW_MAX_INFLIGHT's default: the budget over slot_memory_mib, within [2, 1024]
/// (64 when the budget is unknown).
uint64_t default_max_inflight(const host_limits& host);

/// CREATEOS_EXECUTOR_SHAPE's default on a local control plane: s-4vcpu-8gb when the budget
/// holds it, else the largest of the local catalog's shapes it holds (s-1vcpu-256mb at
/// least).
std::string default_executor_shape(const host_limits& host);

/// Reads the settings. A malformed value is bad_request naming the variable, never a
/// silent default: a timeout outside 1..86400, an egress list with a hostname or with `*`
/// mixed in (parse_egress), a pip entry that looks like an option (`-…`, it would reach
/// pip's argv), GUESTFLOW_MAX_INFLIGHT of 0. The host bounds the defaults of the shape
/// (unless the control plane is CreateOS, whose guests are not on this host) and of
/// GUESTFLOW_MAX_INFLIGHT; an explicit setting is taken as given.
result<executor_settings> executor_settings_from_env(const policy::env_map& env,
                                                     const host_limits& host);
/// The same with this host's limits (read_host_limits()).
result<executor_settings> executor_settings_from_env(const policy::env_map& env);

} // namespace guestflow
