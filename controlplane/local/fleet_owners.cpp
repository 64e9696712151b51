#include "controlplane/local/fleet_owners.hpp"

#include "controlplane/local/service/sandbox_service.hpp"

namespace guestflow::local {

namespace {

std::string key_of(const std::string& name) {
  return std::string{fleet_owners_prefix} + name;
}

/// "<node> <lease>" → node.
std::string node_of(const std::string& value) {
  return value.substr(0, value.find(' '));
}

} // namespace

fleet_owners::fleet_owners(std::shared_ptr<fleet::etcd_client> etcd, std::string node)
    : etcd_(std::move(etcd))
    , node_(std::move(node)) {}

std::string fleet_owners::value(int64_t lease) const {
  return node_ + " " + std::to_string(lease);
}

result<bool> fleet_owners::acquire(const std::string& name) {
  const auto* r = registrar_.load();
  int64_t lease = r ? r->lease() : 0;
  if (!lease)
    return fail(ec::unavailable, "node " + node_ +
                                     " is not registered in the fleet (fenced): it cannot "
                                     "own persistent sandbox " +
                                     name + " now; retry");
  auto claimed = etcd_->create_if_absent(key_of(name), value(lease), lease);
  if (!claimed)
    return fail(ec::unavailable, "cannot take ownership of persistent sandbox " + name +
                                     " in " + etcd_->url() + ": " + claimed.error().message);
  if (claimed->created) return true;
  auto holder = node_of(claimed->current.value);
  if (holder == node_)
    // This node under an earlier lease (before a restart or a fence): it is let go when
    // that lease expires; until then nobody may run the guest.
    return fail(ec::unavailable, "persistent sandbox " + name + " is still owned by node " +
                                     node_ + " under its previous lease " +
                                     std::to_string(claimed->current.lease) +
                                     "; it is free once that lease expires");
  return conflict("persistent sandbox " + name + " is owned by node " + holder +
                  " (its fleet lease is live); it can move only once that "
                  "node is lost and its lease has expired");
}

result<std::string> fleet_owners::other_owner(const std::string& name) {
  auto now = etcd_->get(key_of(name));
  if (!now) return now.error();
  if (!now->has_value()) return std::string{};
  auto holder = node_of((*now)->value);
  return holder == node_ ? std::string{} : holder;
}

void fleet_owners::release(const std::string& name) {
  const auto* r = registrar_.load();
  if (int64_t lease = r ? r->lease() : 0) etcd_->erase_if_value(key_of(name), value(lease));
}

} // namespace guestflow::local
