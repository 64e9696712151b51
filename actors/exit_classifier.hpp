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
/// group with it. 137 before the limit ran out is the memory cgroup's OOM kill.
struct classified_exit {
  int32_t exit_code = 0;     ///< -1 for a timeout (lfx's convention), else the raw code
  std::optional<ec> outcome; ///< ec::timeout or ec::oom
};

classified_exit classify_exit(int32_t raw_exit, const std::optional<std::string>& error,
                              uint64_t elapsed_ms, uint32_t timeout_seconds);

/// `timeout --signal=KILL <n> <cmd> <args…>`, as every guest program is run.
exec_request with_timeout(uint32_t timeout_seconds, std::string cmd,
                          std::vector<std::string> args);

} // namespace guestflow
