#pragma once

#include "messages/json.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

/// What crosses between a fleet's members: a control plane's capacity (`GET /v1/capacity`,
/// and the node record it publishes in etcd), a reusable guest's fleet-wide name claim, and
/// the bodies of etcd's v3 JSON gateway (fleet/etcd_client speaks it; RapidJSON stays here).
namespace guestflow {

/// The fixed etcd prefix of a fleet's keys (docs/fleet.md).
inline constexpr std::string_view fleet_prefix = "/guestflow/";
/// `/guestflow/nodes/<node>` → node_capacity with `url`, under the node's lease.
inline constexpr std::string_view fleet_nodes_prefix = "/guestflow/nodes/";
/// `/guestflow/names/<name>` → name_claim, created by a create-if-absent transaction.
inline constexpr std::string_view fleet_names_prefix = "/guestflow/names/";

/// A control plane's capacity: `data` of `GET /v1/capacity`, and (with `url`) the record a
/// fleet node keeps current in etcd. Committed memory is the sum of live guests' shape memory.
struct node_capacity {
  std::string node;
  uint64_t memory_budget_mib = 0;
  uint64_t memory_committed_mib = 0;
  uint64_t guests = 0;
  uint64_t max_guests = 0; ///< 0: no cap on the count (memory still binds)
  bool draining = false;
  bool ready = false;
  std::string url; ///< the node's advertise URL (the etcd record; "" from /v1/capacity)

  /// True when a guest of `mem_mib` fits under both the memory budget and the count cap.
  bool has_room_for(uint64_t mem_mib) const noexcept {
    if (max_guests != 0 && guests >= max_guests) return false;
    return memory_committed_mib + mem_mib <= memory_budget_mib;
  }

  friend bool operator==(const node_capacity& a, const node_capacity& b) {
    return a.node == b.node && a.memory_budget_mib == b.memory_budget_mib &&
           a.memory_committed_mib == b.memory_committed_mib && a.guests == b.guests &&
           a.max_guests == b.max_guests && a.draining == b.draining && a.ready == b.ready &&
           a.url == b.url;
  }
};

template<>
result<node_capacity> decode<node_capacity>(std::string_view, const decode_limits&);
/// Compact JSON; `url` only when non-empty.
std::string encode(const node_capacity& x);

/// `/guestflow/names/<name>`: which node holds the reusable guest, and which runtime
/// claimed it.
struct name_claim {
  std::string node;
  std::string owner;
  friend bool operator==(const name_claim& a, const name_claim& b) {
    return a.node == b.node && a.owner == b.owner;
  }
};

template<>
result<name_claim> decode<name_claim>(std::string_view, const decode_limits&);
std::string encode(const name_claim& x);

/// etcd v3's JSON gateway (etcd 3.4: `/v3/kv/…`, `/v3/lease/…`). Keys and values travel
/// base64-encoded; int64 fields arrive as decimal strings; zero values are left out.
namespace etcd {

struct key_value {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

/// `/v3/kv/range`, `/v3/kv/put` and `/v3/kv/deleterange` answers (and a txn's).
struct kv_reply {
  int64_t revision = 0;       ///< the store's revision after the call
  std::vector<key_value> kvs; ///< range: the keys found; txn: those of range responses
  int64_t deleted = 0;        ///< deleterange (and a txn's delete responses)
  bool succeeded = false;     ///< txn: the compares held
};

struct lease_reply {
  int64_t id = 0;
  int64_t ttl = 0; ///< seconds left; 0 or less: the lease is gone (keepalive of a dead one)
};

/// An error body `{"error", "message", "code"}` (gRPC status code: 5 not found, 14
/// unavailable, …). `code` 0 when the body is not one.
struct gateway_error {
  std::string message;
  int64_t code = 0;
};

/// The smallest key greater than every key starting with `prefix` (range_end of a prefix
/// scan); "\0" for an empty prefix (the whole keyspace).
std::string prefix_end(std::string_view prefix);

std::string range_body(std::string_view key, std::string_view range_end = {});
std::string put_body(std::string_view key, std::string_view value, int64_t lease = 0);
std::string delete_body(std::string_view key, std::string_view range_end = {});
/// Puts `key` only if it does not exist (create_revision == 0); else reads it back.
std::string create_if_absent_body(std::string_view key, std::string_view value, int64_t lease);
/// Deletes `key` only if its value is exactly `value`.
std::string delete_if_value_body(std::string_view key, std::string_view value);
std::string lease_grant_body(int64_t ttl_seconds);
std::string lease_id_body(int64_t id);

result<kv_reply> decode_kv_reply(std::string_view text);
/// `/v3/lease/grant` (`{ID, TTL}`), or one line of `/v3/lease/keepalive` (`{"result":…}`).
result<lease_reply> decode_lease_reply(std::string_view text);
/// Any body: the error it carries, or code 0.
gateway_error decode_gateway_error(std::string_view text);

} // namespace etcd
} // namespace guestflow
