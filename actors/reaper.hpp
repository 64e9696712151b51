#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <string>
#include <unordered_map>
#include <vector>

namespace guestflow {

struct reaper_options {
  std::string owner; ///< this runtime's owner id (names.hpp)
  std::chrono::milliseconds retry_initial{500};
  std::chrono::milliseconds retry_max{30'000};
  /// How long a name whose create answer was lost is looked for before it is given up.
  std::chrono::seconds lost_create_watch{600};
  std::chrono::seconds call_timeout{90};
  std::chrono::seconds drain_deadline{60};
  /// List calls a sweep makes before it gives up: a start-up sweep that fails once (a 5xx,
  /// a cut answer) would otherwise leave the dead predecessor's guests until the next start.
  uint32_t sweep_attempts = 5;
};

struct reaper_state {
  static inline const char* name = "reaper";

  struct entry {
    std::string id;        ///< empty until the create answered (or a lookup found it)
    caf::actor_addr owner; ///< the execution that tracked it
    bool owed = false;     ///< the reaper must delete it
    bool in_flight = false;
    bool look_once = false; ///< a refused create: one lookup, then forget if absent
    /// The owner's own delete is on its way (it answered its run first): a drain waits for
    /// its `released` (or `reap`, or its death) instead of deleting the guest beside it.
    bool owner_deleting = false;
    /// Its owner said its create ended without an answer (reap): a lost create. A drain gives
    /// it up once a list shows no such guest, instead of watching it until the drain's
    /// deadline (a control plane that was down made nothing; a late one is the next start's).
    bool create_over = false;
    uint32_t attempts = 0;
    std::chrono::steady_clock::time_point tracked_at;
    std::chrono::steady_clock::time_point next_try;
  };

  controlplane_actor cp;
  reaper_options opts;
  std::unordered_map<std::string, entry> guests; ///< by guest name
  /// The names each live owner tracked (keys of `guests`), so that an owner's death costs
  /// a lookup, not a scan of every tracked guest (thousands in flight).
  std::unordered_multimap<caf::actor_addr, const std::string*> owned;
  reaper_stats stats;
  /// The earliest tick on its way, if any: a retry due sooner schedules its own (the later
  /// one then arrives to nothing due), so no retry waits for another's longer backoff.
  bool tick_scheduled = false;
  std::chrono::steady_clock::time_point tick_at;
  bool lookup_in_flight = false;
  /// Sweeps whose list has not answered yet: a drain waits for what they will owe (else a
  /// short CLI run would exit in the middle of its start-up sweep).
  uint32_t sweeps_listing = 0;
  /// Sweeps whose list failed, waiting for their retry (counted in `sweeps_listing` only while
  /// a list call is out). A drain answers them with their last error instead of waiting.
  struct waiting_sweep {
    uint32_t older_than_s = 0;
    caf::typed_response_promise<uint64_t> rp;
    uint32_t attempts = 0;
    std::chrono::steady_clock::time_point next_try;
    caf::error last;
  };
  std::vector<waiting_sweep> sweeps_waiting;
  std::vector<caf::typed_response_promise<uint64_t>> drains;
  std::chrono::steady_clock::time_point drain_deadline_at;
};

/// Guaranteed deletion (see actors.hpp). Deletes by id when it knows it, otherwise looks
/// names up in one list call per round; retries with capped exponential backoff.
reaper_actor::behavior_type reaper(reaper_actor::stateful_pointer<reaper_state> self,
                                   controlplane_actor cp, reaper_options opts);

/// Seconds since the Unix epoch of an RFC 3339 UTC timestamp ("2026-11-30T09:42:28Z",
/// fractional seconds and "+00:00" accepted); nullopt if malformed.
std::optional<int64_t> parse_rfc3339(const std::string& text);

} // namespace guestflow
