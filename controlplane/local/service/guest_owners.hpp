#pragma once

#include "messages/error.hpp"

#include <string>

/// Who may run a persistent guest whose workspace lives under a workspace root shared by a
/// fleet's nodes (`--workspace-root`): exactly one node at a time, the one holding the
/// guest's ownership. The local control plane asks before it builds or starts such a guest
/// and lets go when it deletes it; fleet_owners.hpp keeps ownership in etcd, on the node's
/// lease, so that it goes with a lost node once its lease expires (and never before).
namespace guestflow::local {

class guest_owners {
public:
  virtual ~guest_owners() = default;
  /// Makes this node the owner of guest `name`, or finds it already is. Fails `conflict`
  /// naming the owner when another node (whose lease is live) holds it, `unavailable` when
  /// this node is fenced (no lease) or the store cannot be reached: nothing is started then.
  virtual result<bool> acquire(const std::string& name) = 0;
  /// The node holding `name` when it is another node; empty when it is this node or nobody.
  /// An error when the store cannot tell.
  virtual result<std::string> other_owner(const std::string& name) = 0;
  /// Gives `name` up (the guest was deleted); best effort.
  virtual void release(const std::string& name) = 0;
  /// This node's name (what other nodes see as the owner).
  virtual const std::string& node() const = 0;
};

} // namespace guestflow::local
