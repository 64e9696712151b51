#pragma once

#include "messages/error.hpp"
#include "messages/session.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow {

/// The guest name of the session of (user, thread) for runtime `owner`: `gf-s-` + 17
/// base36 chars of a hash of all three (22 chars). Deterministic, so one (user, thread) never
/// gets two guests and a restarted server finds its stopped guest again; never of the
/// ephemeral form (no '-' at index 11), so no sweep of ephemeral guests (the reaper's,
/// `guestflow reap`) deletes a session's files: only DELETE and the retention do.
std::string session_guest_name(std::string_view owner, std::string_view user_id,
                               std::string_view thread_id);

/// The shape of a session that asks for `memory_mib` and/or `cpus` (DeerFlow's keys): the
/// smallest catalog shape with at least max(memory_mib, floor_mib) MiB and `cpus` vCPUs
/// (memory enforced by the guest's memory cgroup, vCPUs as its CPU weight), rounding up,
/// never down. Refused naming the key and the limit, never clamped: bad_request when no
/// shape of the catalog offers it; policy_refused when the server pinned a shape that does
/// not fit (`pinned`, GUESTFLOW_SHAPE / CREATEOS_SANDBOX_SHAPE) or the shape has more memory
/// than `max_memory_mib` (GUESTFLOW_SESSION_MAX_MEMORY_MIB).
result<shape> session_shape(const shape_list& catalog, std::optional<uint64_t> memory_mib,
                            std::optional<uint32_t> cpus, uint64_t floor_mib,
                            const std::optional<std::string>& pinned,
                            std::optional<uint64_t> max_memory_mib);

struct session_pool_options {
  /// GUESTFLOW_SESSION_REPLICAS: running guests (creating or waking + active + warm).
  uint32_t replicas = 3;
  std::chrono::seconds idle_timeout{600}; ///< GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS; 0 = never
  /// GUESTFLOW_SESSION_RETENTION_SECONDS: a stopped guest is deleted (by the control plane,
  /// delete_after_stop_seconds) this long after its stop, and forgotten here then; 0 = never.
  std::chrono::seconds retention{1'209'600};
};

/// The session pool's bookkeeping, without I/O or a clock of its own (the caller passes
/// `now`, tests a fake one): which guest each session has and in which state, the replica
/// cap over running guests, which warm guest to stop for room, which are idle past the
/// timeout, which stopped ones the retention has deleted. The session manager actor does
/// the control-plane calls it decides on.
class session_pool {
public:
  using time_point = std::chrono::steady_clock::time_point;

  enum class state : uint8_t {
    creating, ///< its create, or the wake of its stopped guest, is in flight
    active,   ///< acquired
    warm,     ///< released: running, kept for the same user and thread
    stopping, ///< its stop is in flight (not counted against the cap)
    stopped,  ///< memory freed, files kept; the next acquire wakes it (not counted)
    deleting, ///< its delete is in flight (not counted)
  };

  struct slot {
    std::string name;
    session_request req;
    std::string guest_id;
    state st = state::creating;
    time_point released_at{}; ///< warm: since; stopped: when it stopped
  };

  /// What an acquire must do next.
  struct decision {
    enum class kind : uint8_t {
      ready,  ///< the session is active now (`reused`)
      wait,   ///< a create, wake, stop or delete of this name is in flight: ask again later
      create, ///< a creating slot was added: create the guest (after stopping `evict`)
      wake,   ///< its stopped guest `guest_id` is waking: start it (after stopping `evict`)
      refuse, ///< `why`
    };
    kind what = kind::refuse;
    bool reused = false;
    std::string guest_id;             ///< wake
    std::optional<std::string> evict; ///< create, wake: a warm guest now `stopping`
    failure why;
  };

  explicit session_pool(session_pool_options opts);

  /// Acquires the session `name` for `req`: the active or warm slot (ready), a slot in
  /// flight (wait), its stopped guest (wake), or a new one (create). Waking or creating at
  /// the cap first stops the least recently released warm slot; with none, refused with
  /// `capacity`. A slot of another image, network policy, mounts, memory_mib or cpus (what
  /// the guest was made with) is refused with `bad_request`; the thread dir and the idle
  /// timeout are the latest acquire's.
  decision acquire(const std::string& name, const session_request& req, time_point now);

  /// The create or wake of a creating slot succeeded: it becomes active on `guest_id`.
  void created(const std::string& name, std::string guest_id);

  /// The create or wake failed: the slot is forgotten (a guest left behind is found again
  /// by name on the next acquire).
  void create_failed(const std::string& name);

  /// active → warm (idle from `now`); warm and stopped stay as they are. not_found for no
  /// slot, bad_request for one in flight.
  result<slot> release(const std::string& name, time_point now);

  /// Marks the slot deleting (the caller deletes its guest); not_found for no slot,
  /// bad_request for one in flight; a second delete of a deleting slot is not_found.
  result<slot> begin_delete(const std::string& name);

  /// The delete of a deleting slot ended (either way): the slot is gone.
  void deleted(const std::string& name);

  /// The stop of a stopping slot answered: stopped from `now`; failed: forgotten (the
  /// guest is found again by name; the control plane's idle TTL stops it meanwhile).
  void stopped(const std::string& name, bool ok, time_point now);

  /// A slot's idle timeout: its session's `idle_timeout_seconds` (the latest acquire's),
  /// else the server's; 0 = never.
  std::chrono::seconds idle_timeout(const slot& s) const;

  /// Warm slots idle for their timeout or longer, now marked stopping. Stopped slots past
  /// the retention are forgotten (the control plane deleted their guests).
  std::vector<slot> expire(time_point now);

  /// When the next warm slot falls idle or stopped slot expires (none: nothing to wait for).
  std::optional<time_point> next_expiry() const;

  const slot* find(const std::string& name) const;

  /// Slots that count against the cap: running guests (creating, active, warm).
  size_t counted() const;

  const session_pool_options& options() const noexcept { return opts_; }

private:
  session_pool_options opts_;
  std::map<std::string, slot> slots_;
};

} // namespace guestflow
