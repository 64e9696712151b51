#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <optional>

namespace guestflow {

struct execution_options {
  /// Host-side exec deadline = the guest's timeout + grace: only a backstop for a control
  /// plane that stops answering; the guest's timeout(1) is the real wall clock.
  std::chrono::seconds exec_grace{30};
  std::chrono::seconds call_timeout{150}; ///< CAF-level backstop on every other call
  size_t stdout_cap = size_t{16} << 20;   ///< streamed output kept when there is no listener
  size_t stderr_cap = size_t{1} << 20;
  exec_sink_actor listener;               ///< receives streamed lines instead, if set
};

struct execution_state {
  static inline const char* name = "execution";

  /// requested → creating → uploading → running → deleting → done | failed
  enum class phase : uint8_t { requested, creating, uploading, running, deleting, done, failed };

  phase at = phase::requested;
  controlplane_actor cp;
  reaper_actor reaper;
  execution_spec spec;
  execution_options opts;
  std::string guest_id;
  caf::typed_response_promise<execution_report> promise;
  caf::actor_addr caller;
  std::optional<failure> error; ///< the first failure; the run still deletes its guest
  exec_result result;
  std::optional<ec> outcome;
  bool cancelled = false;
  size_t next_upload = 0;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point exec_started;
};

/// One execution: create (name tracked by the reaper first) → upload → exec → delete, in
/// every path. A failure anywhere still ends in exactly one delete (or, if the delete
/// cannot be done, a hand-over to the reaper); a lost create answer is reaped by name.
execution_actor::behavior_type
execution(execution_actor::stateful_pointer<execution_state> self, controlplane_actor cp,
          reaper_actor reaper, execution_options opts);

} // namespace guestflow
