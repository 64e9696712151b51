#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

/// What one local control plane lets its guests commit, and whether it takes creates at
/// all: the admission rule of `POST /v1/sandboxes`, `GET /v1/capacity`, drain, and the
/// fence a fleet registration raises when it loses its lease.
namespace guestflow::local {

/// Guests a control plane holds by default: the runtime's own ceiling of runs in flight
/// (GUESTFLOW_MAX_INFLIGHT's default stops at 1024 too). It bounds what the memory budget
/// does not see — per-guest processes, cgroups, network namespaces and nft rules, and the
/// records every list and sweep walks — far below the guest network's 16,384 /30 subnets.
inline constexpr uint32_t default_max_guests = 1024;

/// `--max-guests` may not exceed the guest network's /30 subnets (10.231.0.0/16).
inline constexpr uint32_t max_max_guests = 16384;

struct capacity_limits {
  uint64_t memory_budget_mib = 0;
  uint32_t max_guests = default_max_guests;
};

/// What the guests on this node hold now: every guest not destroyed or failed (creating
/// ones included: a create reserves its shape's memory when admitted), plus the warm pool's
/// targets.
struct capacity_usage {
  uint64_t memory_mib = 0;
  uint32_t guests = 0;
};

/// `GET /v1/capacity`'s data (and, with the advertise URL, the node's fleet record).
struct capacity_status {
  std::string node;
  uint64_t memory_budget_mib = 0;
  uint64_t memory_committed_mib = 0;
  uint32_t guests = 0;
  uint32_t max_guests = 0;
  bool draining = false;
  bool ready = true;
};

/// `{"node":…,"memory_budget_mib":…,…}` — the wire object; `url`, when given, is added
/// last (the fleet record's advertise URL).
std::string encode_capacity(const capacity_status& s, const std::string& url = {});

/// 80% of the host's MemTotal in MiB (`--memory-budget-mb`'s default); nullopt when
/// /proc/meminfo cannot be read.
std::optional<uint64_t> default_memory_budget_mib();

/// The host's name (`--node`'s default); "localhost" when it has none.
std::string host_node_name();

/// A node name: 1–63 of [A-Za-z0-9._-], starting with a letter or digit (it is the last
/// segment of the node's fleet key); bad_request naming `flag` otherwise.
result<std::string> parse_node_name(std::string_view name, std::string_view flag);

/// The admission rule and the node's switches. The caller owns the usage (it knows its
/// guests) and asks admit() in the same critical section in which it records the new guest
/// as `creating`, so that concurrent creates see each other's reservations and a burst
/// cannot overshoot; a failed create's record goes, and its reservation with it.
///
/// Thread-safe: the switches are atomics; changes are published through a version that a
/// watcher (the fleet registrar, on its own thread) waits on.
class capacity_gate {
public:
  capacity_gate(std::string node, capacity_limits limits);

  /// nullopt: `s` fits. Otherwise a `capacity` failure whose message names what is full:
  /// fenced (not ready), draining, the guest count, or the memory budget — in that order.
  std::optional<failure> admit(const capacity_usage& now, const shape& s) const;

  capacity_status status(const capacity_usage& now) const;

  const std::string& node() const noexcept { return node_; }
  const capacity_limits& limits() const noexcept { return limits_; }

  /// Drain: creates refused, existing guests untouched. Returns whether it changed.
  bool set_draining(bool on);
  bool draining() const noexcept { return draining_; }

  /// Not ready = fenced: creates refused (a fleet node whose lease is gone or not yet
  /// granted). A node without a fleet is always ready.
  bool set_ready(bool on);
  bool ready() const noexcept { return ready_; }

  /// Something a status would show changed (a guest came or went, a switch flipped).
  void changed();
  uint64_t version() const;
  /// Blocks until version() differs from `seen`, `until` passes, or wake() is called;
  /// returns the version then.
  uint64_t wait_change(uint64_t seen, std::chrono::steady_clock::time_point until);
  /// Ends every wait_change() at once (a watcher stopping).
  void wake();

private:
  const std::string node_;
  const capacity_limits limits_;
  std::atomic<bool> draining_{false};
  std::atomic<bool> ready_{true};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t version_ = 0;
  uint64_t wakes_ = 0;
};

} // namespace guestflow::local
