#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// What a guest's exit means. The guest's own `timeout --signal=KILL N` is the
/// authoritative wall clock: it exits 124, or 137 when KILL takes timeout(1)'s process
/// group with it once the limit ran out. An OOM is only what the guest's memory cgroup
/// counted (the control plane's `oom_killed`); any other 137 — the program killed itself
/// or its timeout(1) parent, or exited 137 — is `killed`, never a guess at the cause.
struct classified_exit {
  int32_t exit_code = 0;     ///< -1 for a timeout (lfx's convention), else the raw code
  std::optional<ec> outcome; ///< ec::timeout, ec::oom or ec::killed
};

classified_exit classify_exit(int32_t raw_exit, bool oom_killed, uint64_t elapsed_ms,
                              uint32_t timeout_seconds);

/// `timeout --signal=KILL <n> <cmd> <args…>`, as every guest program is run.
exec_request with_timeout(uint32_t timeout_seconds, std::string cmd,
                          std::vector<std::string> args);

} // namespace guestflow
