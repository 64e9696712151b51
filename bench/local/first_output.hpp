#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

/// Time to first output as `guestflow code` sees it: the runtime library (actors,
/// execution, reaper, pooled client) runs a one-line Python program against a control
/// plane, built by make_code_spec exactly as `guestflow code` builds it (upload, then
/// `timeout --signal=KILL 30 python3 /workspace/main_….py`, streamed), and a sink actor
/// stands where `guestflow code`'s output relay would. The CLI reaches a daemon the same
/// way with GUESTFLOW_CONTROL_PLANE_URL.
namespace guestflow::bench {

struct first_output_samples {
  std::vector<double> first_output_ms; ///< run sent (create's request) → first stdout chunk
  std::vector<double> run_ms;          ///< run sent → report (the guest deleted)
};

/// `runs` sequential runs (after `warmup` unmeasured ones) against the control plane at
/// http://127.0.0.1:`port`; `before_each` (if set) runs before each one, untimed (the
/// bench waits there for a full warm pool). Throws std::runtime_error on any failed run,
/// or when the reaper still tracks a guest afterwards.
first_output_samples measure_first_output(uint16_t port, size_t warmup, size_t runs,
                                          const std::function<void()>& before_each);

} // namespace guestflow::bench
