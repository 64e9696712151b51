#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <memory>
#include <optional>

namespace guestflow {

/// Returned files: after the command exits, `dir` is archived inside the guest (tar,
/// pax format) to `archive`, fetched with `cap_bytes` binding during the transfer, and
/// unpacked in memory into the report's `files`. The command is expected to have created
/// `dir` (component_spec does). Failures here land in `files->error`, never in the run's
/// own results.
struct collect_options {
  std::string dir = "/workspace/artifacts";
  std::string archive = "/workspace/.gf-artifacts.tar"; ///< unique per run (component_spec)
  uint64_t cap_bytes = uint64_t{5} << 20;               ///< GUESTFLOW_ARTIFACT_CAP_BYTES
  uint32_t tar_timeout_seconds = 120;                   ///< timeout(1) around tar
};

struct execution_options {
  /// Host-side exec deadline = the guest's timeout + grace: only a backstop for a control
  /// plane that stops answering; the guest's timeout(1) is the real wall clock.
  std::chrono::seconds exec_grace{30};
  std::chrono::seconds call_timeout{150}; ///< CAF-level backstop on every other call
  size_t stdout_cap = size_t{16} << 20;   ///< streamed output kept when there is no listener
  size_t stderr_cap = size_t{1} << 20;
  exec_sink_actor listener; ///< receives streamed lines instead, if set
  /// Set: the guest is reusable (component surface) — acquired from the registry (adopted
  /// or created there, egress checked, running) instead of created, and released to it
  /// instead of deleted; the reaper never hears of it. What the runtime put into the guest
  /// (the uploads, the archive) is removed before the release; what the program wrote stays.
  guest_registry_actor registry;
  /// Set: a guest call answered `paused` (auto-pause raced the run) resumes the guest
  /// through this actor and is sent once more.
  lifecycle_actor lifecycle;
  /// Set: /workspace/artifacts comes back in the report (see collect_options). Shared:
  /// every execution actor carries its options, and most runs collect nothing.
  std::shared_ptr<const collect_options> collect;
};

struct execution_state {
  static inline const char* name = "execution";

  /// requested → creating (or acquiring) → uploading → running → collecting → deleting
  /// (or releasing) → done | failed
  enum class phase : uint8_t {
    requested,
    creating,
    uploading,
    running,
    collecting,
    deleting,
    done,
    failed
  };

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
  /// On the heap: only a component that returns files has them, and this state is part of
  /// every execution actor. With `opts.collect` shared too, the actor fits jemalloc's
  /// 1.75 KiB size class instead of 2 KiB (~250 B less per run in flight).
  std::unique_ptr<returned_files> files;
  bool reused = false; ///< the registry adopted the reusable guest (see execution_report)
  bool cancelled = false;
  bool exited = false; ///< the command's exit is known: the run can be answered
  size_t next_upload = 0;
  std::chrono::steady_clock::time_point started;
  std::chrono::steady_clock::time_point exec_started;
  /// A streamed exec's exit line's exec_ms (the program's own run), when the server sent it.
  uint64_t stream_exec_ms = 0;
};

/// One execution: create (name tracked by the reaper first) → upload → exec → [collect] →
/// delete, in every path. A failure anywhere still ends in exactly one delete (or, if the
/// delete cannot be done, a hand-over to the reaper); a lost create answer is reaped by
/// name. With `opts.registry` the guest is acquired and released instead (never deleted).
/// A run whose command exited is answered before its delete; the actor ends once the
/// guest is deleted or handed over, so a caller that holds a slot for it frees the slot
/// when the actor is gone (a monitor), not at the answer.
execution_actor::behavior_type
execution(execution_actor::stateful_pointer<execution_state> self, controlplane_actor cp,
          reaper_actor reaper, execution_options opts);

} // namespace guestflow
