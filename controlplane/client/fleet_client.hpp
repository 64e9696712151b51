#pragma once

#include "controlplane/client/client.hpp"

#include <map>
#include <memory>
#include <string>
#include <vector>

/// A fleet of control planes behind the one client interface, so the runtime above (its
/// actors, the reaper, the registry) is the same for one node and for many.
///
/// Placement: a create goes to a ready, non-draining, reachable node with room for the
/// shape — least committed memory first (the node's last report plus what this client has
/// placed there since), ties broken at random; a node that refuses with `capacity`, or
/// cannot be reached, hands the create to the next one. No node with room → `capacity` at
/// once: "no control plane has room for SHAPE: 3 nodes, 2 full, 1 draining".
///
/// Calls by id go to the node that created (or listed) the guest; an id this client has
/// not seen (a runtime restarted) is looked up on every node. A node that is gone — its
/// etcd lease expired, or it stopped answering `/v1/capacity` — fails its calls with
/// `unavailable` at once, in-flight ones included: within `refresh` (static list) or the
/// node's lease TTL + `refresh` (etcd) of its loss. Its address is kept, so deletes owed to
/// it (the reaper retries them) complete when it is back.
///
/// Reusable names (a create with `name`) are claimed fleet-wide first (etcd mode:
/// `/guestflow/names/<name>`, a create-if-absent transaction), so two runtimes never create
/// one name on two nodes; the loser waits (bounded) for the winner's guest to appear and
/// gets bad_request "name … is taken", after which a lookup by name (list) finds the guest
/// on its node. The claim is erased when the guest is deleted through this client.
namespace guestflow::cp {

struct fleet_config {
  std::vector<std::string> urls; ///< static list (`GUESTFLOW_CONTROL_PLANE_URL=A,B,…`)
  std::string etcd_url;          ///< or etcd (`GUESTFLOW_FLEET=etcd://…`): node records
  std::string api_key;           ///< sent to every node
  client_config node;            ///< each node's client
  millis refresh{1'000};         ///< how often node capacities are re-read
  millis probe_timeout{2'000};   ///< a node's /v1/capacity, an etcd call
  /// How long a create whose name another runtime claimed waits for that guest to appear
  /// on its node before the claim counts as abandoned and is taken over.
  millis claim_wait{15'000};
};

/// Placement failures, by reason (counters since start).
struct placement_failures {
  uint64_t no_room = 0;     ///< no node had room for the shape (the create got `capacity`)
  uint64_t refused = 0;     ///< a node refused with `capacity` (the next one was tried)
  uint64_t unreachable = 0; ///< a chosen node could not be reached (the next one was tried)
  uint64_t no_nodes = 0;    ///< no node known at all
};

/// One node as the fleet client sees it (what `/metrics` shows per node).
struct fleet_node_view {
  std::string node;
  std::string url;
  bool reachable = false; ///< its last /v1/capacity answered (static) / it is in etcd
  node_capacity capacity; ///< as last reported (+ what this client placed since)
  uint64_t placed = 0;    ///< creates this client placed on it
};

struct fleet_snapshot {
  std::vector<fleet_node_view> nodes; ///< by node name
  placement_failures failures;
};

/// A fleet client, not started: `make` refuses a config with neither list nor etcd URL.
result<std::shared_ptr<client>> make_fleet_client(fleet_config cfg);

/// The per-node state and placement counters of `c` when it is a fleet client; nullopt
/// for a single-node client. Thread-safe.
std::optional<fleet_snapshot> fleet_snapshot_of(const client& c);

/// The snapshot as Prometheus text (what `/metrics` appends for a fleet): per node
/// `guestflow_fleet_node_{ready,draining,reachable,memory_committed_mib,memory_budget_mib,
/// guests,max_guests,placed_total}{node="…"}` and `guestflow_fleet_placement_failures_total
/// {reason="no_room|refused|unreachable|no_nodes"}`.
std::string prometheus_text(const fleet_snapshot& s);

/// True when `base_url` names a fleet (a comma-separated list, or `etcd://…`) rather than
/// one control plane: `client::make` then builds a fleet client.
bool is_fleet_url(std::string_view base_url);

/// The fleet config that `base_url` (as is_fleet_url accepts) describes.
result<fleet_config> fleet_config_of(const endpoint& ep, const client_config& node);

} // namespace guestflow::cp
