#pragma once

#include "controlplane/local/http/fault_plan.hpp"
#include "controlplane/local/http/route_table.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

/// A fault_plan applied to the wire API: every handler route_table registers goes through
/// with_faults, which asks the process's installed injector (none: the handler alone, one
/// atomic load per request). The faults are built from the transport's own actions, so the
/// HTTP session needs no change: a refusal is a reply, a cut answer is a file download whose
/// promised length is never reached, a held call is an exec whose "command" is a timer the
/// client's departure ends.
namespace guestflow::local {

/// One call a fault or a delay was applied to (what the log line says).
struct fault_event {
  fault_op op = fault_op::other;
  std::optional<fault_kind> kind;
  std::chrono::milliseconds delay{0};
  uint64_t call = 0; ///< the call's number among op's (0-based)
};

/// The `fault injected: …` log line of an event (tests/soak counts them).
std::string describe(const fault_event& e);

/// A plan plus its per-operation call counters; thread-safe.
class fault_injector {
public:
  explicit fault_injector(fault_plan plan,
                          std::function<void(const fault_event&)> on_fault = {});

  const fault_plan& plan() const noexcept { return plan_; }

  /// The next call of `op`: its number and fate.
  std::pair<uint64_t, fault_decision> next(fault_op op);

  /// Tells the listener (if any) that `e` was applied.
  void applied(const fault_event& e) const;

private:
  fault_plan plan_;
  std::function<void(const fault_event&)> on_fault_;
  std::array<std::atomic<uint64_t>, fault_op_count> calls_{};
};

/// Installs the process's injector (nullptr: none). Install before serving starts; a swap
/// while requests run is safe (each request uses the injector it loaded).
void install_faults(std::shared_ptr<fault_injector> injector);
std::shared_ptr<fault_injector> installed_faults();

/// Which operation of a spec an endpoint is.
fault_op fault_op_of(endpoint ep);

/// `h`, consulting the installed injector on every call.
handler with_faults(endpoint ep, handler h);

} // namespace guestflow::local
