#pragma once

#include "actors/actors.hpp"
#include "actors/admission.hpp"
#include "actors/executor_settings.hpp"
#include "actors/flow_run.hpp"
#include "actors/guest_assets.hpp"

#include <caf/stateful_actor.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

namespace guestflow {

struct coordinator_options {
  executor_settings settings; ///< executor_settings_from_env at startup
  std::string owner;          ///< names::owner_id of this runtime (guest names)
  flow_run_options run;
  std::vector<guest_asset> assets = guest_assets(); ///< what every guest gets in /tmp/run
  /// The runner's files travel gzipped (flow_bundle_head); the runtime sets
  /// gzip_bundle_for(its control plane): false on this host.
  bool gzip_bundle = true;
  uint64_t seed = 0; ///< run ids and guest names; 0 = std::random_device
  /// The runtime's execution slots, shared with the other surfaces that start guests;
  /// null: the coordinator makes its own from `settings` (max_inflight, max_queued).
  std::shared_ptr<admission> slots;
};

struct coordinator_state {
  static inline const char* name = "coordinator";

  controlplane_actor cp;
  reaper_actor reaper;
  coordinator_options opts;
  std::mt19937_64 rng;
  std::shared_ptr<admission> slots; ///< opts.slots, or its own
  shared_bytes bundle_head; ///< flow_bundle_head(opts.assets): every run's upload shares it
  std::unordered_map<std::string, flow_run_actor> runs; ///< by run id, until the actor quits
  /// Ended runs still waiting for late joiners, oldest first, and what each holds (an id
  /// no longer in `retained` went meanwhile and is skipped).
  std::deque<std::string> ended;
  std::unordered_map<std::string, uint64_t> retained;
  uint64_t retained_bytes = 0; ///< the sum over `retained`, within settings.retention_bytes
  std::map<caf::actor_addr, std::string> ids; ///< run actor → run id
  coordinator_stats stats;
};

/// Admission and the run registry of whole-flow runs (see actors.hpp). A run is validated
/// (inputs normalized, spec built) before it takes a queue place, so bad input changes no
/// state; a full queue is `capacity` at once. Each admitted run gets a `flow_run` actor
/// that owns its execution, events and subscribers; queued runs start in FIFO order as
/// executions answer — or as another surface frees a slot of the shared admission (its
/// owner then sends `(run_atom, id)` for each run the release started).
coordinator_actor::behavior_type
coordinator(coordinator_actor::stateful_pointer<coordinator_state> self, controlplane_actor cp,
            reaper_actor reaper, coordinator_options opts);

} // namespace guestflow
