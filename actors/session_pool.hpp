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

/// The guest name of the session of (user, thread) for runtime `owner`: of the ephemeral
/// form `gf-b-<owner6>-<10 base36 chars of a hash of both>` (22 chars), so that the
/// reaper's sweep and `guestflow reap` treat a leftover like any other guest of this
/// runtime, yet deterministic, so one (user, thread) never gets two guests.
std::string session_guest_name(std::string_view owner, std::string_view user_id,
                               std::string_view thread_id);

struct session_pool_options {
  uint32_t replicas = 3; ///< GUESTFLOW_SESSION_REPLICAS: creating + active + warm
  std::chrono::seconds idle_timeout{600}; ///< GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS; 0 = never
};

/// The session pool's bookkeeping, without I/O or a clock of its own (the caller passes
/// `now`, tests a fake one): which guest each session has and in which state, the replica
/// cap, which warm guest to evict, which are idle past the timeout. The session manager
/// actor does the control-plane calls it decides on.
class session_pool {
public:
  using time_point = std::chrono::steady_clock::time_point;

  enum class state : uint8_t {
    creating, ///< its create is in flight
    active,   ///< acquired
    warm,     ///< released: kept for the same user and thread
    deleting, ///< its delete is in flight (not counted against the cap)
  };

  struct slot {
    std::string name;
    session_request req;
    std::string guest_id;
    state st = state::creating;
    time_point released_at{};
  };

  /// What an acquire must do next.
  struct decision {
    enum class kind : uint8_t {
      ready,  ///< the session is active now (`reused`)
      wait,   ///< a create or delete of this name is in flight: ask again when it ends
      create, ///< a creating slot was added: create the guest (after deleting `evict`)
      refuse, ///< `why`
    };
    kind what = kind::refuse;
    bool reused = false;
    std::optional<std::string> evict; ///< create: a warm guest now `deleting`, delete it
    failure why;
  };

  explicit session_pool(session_pool_options opts);

  /// Acquires the session `name` for `req`: the active or warm slot (ready), a slot in
  /// flight (wait), or a new one (create) — at the cap by evicting the least recently
  /// released warm slot; with none to evict, refused with `capacity`. A slot of another
  /// image or network policy is refused with `bad_request`.
  decision acquire(const std::string& name, const session_request& req, time_point now);

  /// The create of a creating slot answered: it becomes active.
  void created(const std::string& name, std::string guest_id);

  /// The create failed: the slot is gone.
  void create_failed(const std::string& name);

  /// active → warm (idle from `now`); a warm slot stays as it is. not_found for no slot,
  /// bad_request for one still being created or deleted.
  result<slot> release(const std::string& name, time_point now);

  /// Marks the slot deleting (the caller deletes its guest); not_found for no slot,
  /// bad_request for one being created; a second delete of a deleting slot is not_found.
  result<slot> begin_delete(const std::string& name);

  /// The delete of a deleting slot ended (either way): the slot is gone.
  void deleted(const std::string& name);

  /// Warm slots idle for the timeout or longer, now marked deleting.
  std::vector<slot> expire(time_point now);

  /// When the next warm slot falls idle (none: no warm slot or no timeout).
  std::optional<time_point> next_expiry() const;

  const slot* find(const std::string& name) const;

  /// Slots that count against the cap (creating, active, warm).
  size_t counted() const;

  const session_pool_options& options() const noexcept { return opts_; }

private:
  session_pool_options opts_;
  std::map<std::string, slot> slots_;
};

} // namespace guestflow
