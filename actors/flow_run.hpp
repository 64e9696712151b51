#pragma once

#include "actors/actors.hpp"
#include "actors/admission.hpp"
#include "actors/event_log.hpp"
#include "actors/execution.hpp"
#include "actors/frame_translator.hpp"

#include <caf/stateful_actor.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

struct flow_run_options {
  /// Encoded events kept for late joiners; one who needs an evicted event gets a single
  /// `error` event with code `capacity` instead of a replay with a hole.
  size_t replay_bytes = size_t{4} << 20;
  /// How long a finished run stays joinable (replay from its buffer) before its actor quits.
  std::chrono::seconds retention{60};
  frame_translator_options frames; ///< `timeout_seconds` is taken from the spec
  execution_options execution;     ///< `listener` is set to the run actor itself
  /// The runtime's slots (the coordinator's): the run's slot is marked draining before its
  /// terminal event goes out, so a caller's next run, sent at once, may wait for it.
  std::shared_ptr<admission> slots;
};

/// What the coordinator hands a new run actor.
struct flow_run_init {
  std::string run_id;
  execution_spec spec;
  flow_run_options opts;
  run_subscriber_actor first_subscriber; ///< attached from seq 0 at spawn, if set
  bool first_cancel_on_disconnect = false;
  secret_scrubber secrets; ///< the run's variables: masked in every event it publishes
};

struct flow_run_state {
  static inline const char* name = "flow_run";

  /// queued → running → ended (terminal event sent; retained for late joiners).
  enum class phase : uint8_t { queued, running, ended };

  struct subscriber {
    run_subscriber_actor handle;
    caf::actor_addr addr;
    uint64_t from = 0; ///< first seq this subscriber wants
    bool cancel_on_disconnect = false;
  };

  phase at = phase::queued;
  std::string run_id;
  coordinator_actor parent;
  controlplane_actor cp;
  reaper_actor reaper;
  /// Until the run starts (then it goes to the execution). Held apart, as `secrets`: a run
  /// keeps its state for late joiners after it ended, and these inline made it a bigger
  /// allocation class.
  std::unique_ptr<execution_spec> spec;
  flow_run_options opts;
  frame_translator frames;
  event_log log;
  std::vector<subscriber> subs;
  execution_actor exec;
  std::optional<failure> cancel_reason;    ///< the terminal error of a cancelled run
  bool stopping = false;                   ///< cancel sent to the execution
  bool exec_gone = false;                  ///< the execution's down message arrived
  bool quit_pending = false;               ///< quit once the execution is gone
  std::vector<run_event> scratch;          ///< events of one stream line, reused
  std::unique_ptr<event_scrubber> secrets; ///< null for a run without variables
};

/// One whole-flow run (see actors.hpp): waits for admission, then owns one execution as
/// its listener, turns the streamed frames into events, fans each event in order to every
/// subscriber and keeps the bounded replay buffer. Every event passes one place before it
/// is kept or sent, where the run's secret values are replaced by "********" (the events,
/// its replay, the CLI's output and whatever a subscriber stores or logs never hold one). The
/// terminal event is sent exactly once, after the execution answered (which may be before
/// its guest's delete: the run's slot is freed only once the execution is gone); cancel, the
/// last `cancel_on_disconnect` subscriber going away and a protocol violation all stop the
/// execution first. When the coordinator goes away the run is cancelled.
flow_run_actor::behavior_type flow_run(flow_run_actor::stateful_pointer<flow_run_state> self,
                                       coordinator_actor parent, controlplane_actor cp,
                                       reaper_actor reaper, flow_run_init init);

} // namespace guestflow
