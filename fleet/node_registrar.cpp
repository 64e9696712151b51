#include "fleet/node_registrar.hpp"

#include <algorithm>

namespace guestflow::fleet {
namespace {

using clock = std::chrono::steady_clock;

millis ms(clock::duration d) {
  return std::chrono::duration_cast<millis>(d);
}

} // namespace

node_registrar::node_registrar(std::shared_ptr<etcd_client> etcd, registered_node& node,
                               registrar_settings settings)
    : etcd_(std::move(etcd))
    , node_(node)
    , settings_(std::move(settings))
    , key_(std::string{fleet_nodes_prefix} + settings_.node) {
  if (!settings_.info) settings_.info = [](const std::string&) {};
  if (!settings_.warn) settings_.warn = [](const std::string&) {};
}

node_registrar::~node_registrar() {
  stop();
}

void node_registrar::start() {
  if (thread_.joinable()) return;
  node_.set_ready(false); // fenced until registered
  thread_ = std::thread{[this] { run(); }};
}

void node_registrar::stop() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  node_.wake();
  thread_.join();
  // Gone at once from placement, rather than a TTL later.
  live_lease_ = 0;
  if (lease_) etcd_->lease_revoke(lease_, millis{1000});
  lease_ = 0;
}

millis node_registrar::fence_after() const {
  return ms(settings_.ttl) - ms(settings_.ttl) / 4;
}

millis node_registrar::call_timeout(clock::time_point fence_at) const {
  auto share = std::clamp<millis>(ms(settings_.ttl) / 3, millis{200}, millis{2000});
  auto left = ms(fence_at - clock::now());
  return std::max(millis{100}, std::min(share, left));
}

void node_registrar::warn_once(const std::string& kind, const std::string& what) {
  if (kind == last_warning_) return;
  last_warning_ = kind;
  settings_.warn(what);
}

void node_registrar::fence(const std::string& why) {
  live_lease_ = 0;
  node_.set_ready(false);
  stale_lease_ = lease_;
  lease_ = 0;
  last_warning_.clear();
  settings_.warn("fleet: node " + settings_.node +
                 " fenced (creates refused, guests keep running): " + why +
                 "; registering again once etcd answers");
}

bool node_registrar::register_node() {
  auto started = clock::now();
  auto deadline = started + settings_.ttl;
  if (stale_lease_) {
    // This node's previous lease may be back with etcd (a restarted etcd restores leases
    // with their full TTL): its key would keep the new registration out until it expires.
    auto gone = etcd_->lease_revoke(stale_lease_, call_timeout(deadline));
    if (!gone && gone.error().code != ec::not_found) {
      warn_once("register", "fleet: cannot register node " + settings_.node + " in etcd at " +
                                etcd_->url() + ": " + gone.error().message + "; retrying");
      return false;
    }
    stale_lease_ = 0;
  }
  auto granted = etcd_->lease_grant(settings_.ttl.count(), call_timeout(deadline));
  if (!granted) {
    warn_once("register", "fleet: cannot register node " + settings_.node + " in etcd at " +
                              etcd_->url() + ": " + granted.error().message + "; retrying");
    return false;
  }
  auto lease = granted->id;
  // Written not ready; set_ready(true) below changes the record, which is put at once.
  auto claim = etcd_->create_if_absent(key_, node_.record(), lease, call_timeout(deadline));
  if (!claim || !claim->created) {
    etcd_->lease_revoke(lease, call_timeout(deadline));
    if (!claim)
      warn_once("register", "fleet: cannot register node " + settings_.node + " in etcd at " +
                                etcd_->url() + ": " + claim.error().message + "; retrying");
    else
      warn_once("held",
                "fleet: " + key_ + " is held by another lease (" +
                    std::to_string(claim->current.lease) +
                    ": this node before a restart, or another node with the same --node); "
                    "waiting for it to expire, creates are refused meanwhile");
    return false;
  }
  lease_ = lease;
  live_lease_ = lease;
  last_renewed_ = started;
  last_warning_.clear();
  node_.set_ready(true);
  settings_.info("fleet: node " + settings_.node + " registered in etcd at " + etcd_->url() +
                 " (lease " + std::to_string(lease_) + ", TTL " +
                 std::to_string(settings_.ttl.count()) + " s)");
  return true;
}

bool node_registrar::refresh() {
  auto started = clock::now();
  auto fence_at = last_renewed_ + fence_after();
  auto renewed = etcd_->lease_keepalive(lease_, call_timeout(fence_at));
  if (!renewed && renewed.error().code != ec::not_found) {
    warn_once("renew", "fleet: cannot renew the lease of node " + settings_.node + ": " +
                           renewed.error().message);
    return true; // retried soon; fenced if it stays so until the lease's end
  }
  if (!renewed || *renewed <= 0) {
    fence("etcd says its lease expired");
    return false;
  }
  last_renewed_ = started;
  last_warning_.clear();
  return true;
}

void node_registrar::run() {
  auto seen = node_.wait_change(~uint64_t{0}, clock::now());
  auto retry_gap = std::clamp<millis>(ms(settings_.ttl) / 10, millis{100}, millis{1000});
  auto next_renewal = clock::now();
  bool dirty = false; ///< the record changed since it was last put
  while (!stopping_) {
    if (!lease_) {
      if (!register_node()) {
        seen = node_.wait_change(seen, clock::now() + retry_gap);
        continue;
      }
      next_renewal = clock::now() + settings_.ttl / 3;
      dirty = true; // ready now
    }
    auto fence_at = last_renewed_ + fence_after();
    if (!dirty) {
      auto v = node_.wait_change(seen, std::min(next_renewal, fence_at));
      dirty = v != seen;
      seen = v;
    }
    if (stopping_) break;
    auto now = clock::now();
    if (now >= fence_at) {
      fence("its lease was not renewed for " + std::to_string(fence_after().count()) +
            " ms of its " + std::to_string(settings_.ttl.count()) + " s TTL (etcd at " +
            etcd_->url() + " unreachable)");
      continue;
    }
    if (now >= next_renewal) {
      auto before = last_renewed_;
      if (!refresh()) continue;
      bool renewed = last_renewed_ != before;
      next_renewal = renewed ? now + settings_.ttl / 3 : now + retry_gap;
      dirty = dirty || renewed; // the record is put again with every renewal
    }
    if (!dirty) continue;
    seen = node_.wait_change(~uint64_t{0}, clock::now()); // the version put below
    auto put = etcd_->put(key_, node_.record(), lease_, call_timeout(fence_at));
    if (put) {
      dirty = false;
    } else if (put.error().code == ec::not_found) {
      fence("etcd says its lease expired");
    } else {
      warn_once("put", "fleet: cannot update the record of node " + settings_.node + ": " +
                           put.error().message);
      dirty = false; // put again at the next renewal
    }
  }
}

} // namespace guestflow::fleet
