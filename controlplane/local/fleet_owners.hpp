#pragma once

#include "controlplane/local/service/guest_owners.hpp"
#include "fleet/etcd_client.hpp"
#include "fleet/node_registrar.hpp"

#include <atomic>
#include <memory>
#include <string>

/// Persistent guests' ownership in etcd: `/guestflow/owners/<guest name>` → "<node> <lease>",
/// put under the node's own lease (node_registrar::lease) by a transaction that requires the
/// key absent. The key lives exactly as long as the node's registration: a node that is lost
/// loses its guests when its lease expires (the fleet's fencing time, --fleet-ttl-seconds),
/// and a node that comes back registers under a new lease, so it finds them no longer its.
namespace guestflow::local {

inline constexpr std::string_view fleet_owners_prefix = "/guestflow/owners/";

class fleet_owners final : public guest_owners {
public:
  fleet_owners(std::shared_ptr<fleet::etcd_client> etcd, std::string node);
  /// The registrar whose lease holds the keys (set once it exists; fenced until then).
  void attach(const fleet::node_registrar* registrar) { registrar_ = registrar; }

  result<bool> acquire(const std::string& name) override;
  result<std::string> other_owner(const std::string& name) override;
  void release(const std::string& name) override;
  const std::string& node() const override { return node_; }

private:
  std::string value(int64_t lease) const;

  std::shared_ptr<fleet::etcd_client> etcd_;
  std::string node_;
  std::atomic<const fleet::node_registrar*> registrar_{nullptr};
};

} // namespace guestflow::local
