#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// What a guest's exit means, decided on the guest's side only. The guest's own
/// `timeout --kill-after=5 N` is the authoritative clock: it sends TERM once the program
/// ran N seconds and then exits 124 — the only code that means `timeout`. The host's clock
/// never decides: a stall of the host (a SIGSTOPped control plane, a swapping runtime)
/// counts into any time measured across the exec call, so a 137 measured as "long" may be
/// a program that killed itself long before its limit. An OOM is only what the guest's
/// memory cgroup counted (the control plane's `oom_killed`); any other 137 — the program
/// killed itself or its timeout(1) parent, exited 137, or ignored TERM and was KILLed 5 s
/// past its limit (coreutils reports all of these as 137) — is `killed`.
struct classified_exit {
  int32_t exit_code = 0;     ///< -1 for a timeout (lfx's convention), else the raw code
  std::optional<ec> outcome; ///< ec::timeout, ec::oom or ec::killed
};

classified_exit classify_exit(int32_t raw_exit, bool oom_killed);

/// `timeout --kill-after=5 <n> <cmd> <args…>`, as every guest program is run: TERM first
/// (so that a timeout exits 124, told apart from a program's own SIGKILL, which timeout(1)
/// reports as 137 as it would its own `--signal=KILL`), KILL 5 s later for a program that
/// ignores TERM.
exec_request with_timeout(uint32_t timeout_seconds, std::string cmd,
                          std::vector<std::string> args);

} // namespace guestflow
