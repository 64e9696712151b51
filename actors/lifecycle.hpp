#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

namespace guestflow {

struct lifecycle_options {
  /// How long a guest may take to become running (resume, or a create still in flight).
  std::chrono::milliseconds deadline{120'000};
  std::chrono::milliseconds poll_interval{250};
  std::chrono::seconds call_timeout{60}; ///< CAF-level backstop on each control-plane call
};

struct lifecycle_state {
  static inline const char* name = "lifecycle";

  struct pending_guest {
    std::vector<caf::typed_response_promise<sandbox_view>> waiters;
    std::chrono::steady_clock::time_point deadline;
    bool in_flight = false; ///< a GET or resume is outstanding
    bool resumed = false;   ///< a resume was sent (once per ensure round)
    std::string last_status;
  };

  controlplane_actor cp;
  lifecycle_options opts;
  std::unordered_map<std::string, pending_guest> guests; ///< by guest id
};

/// See lifecycle_actor (actors.hpp): GET → running: done; paused → one
/// resume, then poll; creating / pausing / resuming → poll; error, failed, destroying,
/// destroyed → unavailable. Past the deadline → transient with the last status seen.
lifecycle_actor::behavior_type
lifecycle(lifecycle_actor::stateful_pointer<lifecycle_state> self, controlplane_actor cp,
          lifecycle_options opts);

} // namespace guestflow
