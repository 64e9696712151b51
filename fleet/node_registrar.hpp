#pragma once

#include "fleet/etcd_client.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

/// A control plane's membership of a fleet: its record `/guestflow/nodes/<node>` under a
/// lease of its own, kept current, and the fence raised when the lease cannot be renewed.
namespace guestflow::fleet {

/// What the registrar needs of the node it registers (the local control plane implements
/// it over its capacity gate; tests may fake it).
class registered_node {
public:
  virtual ~registered_node() = default;
  /// The node's record as it is now: `GET /v1/capacity`'s object plus `"url"`.
  virtual std::string record() = 0;
  /// A number that changes whenever record() would: blocks until it differs from `seen`,
  /// `until` passes or wake() is called, and returns it.
  virtual uint64_t wait_change(uint64_t seen, std::chrono::steady_clock::time_point until) = 0;
  virtual void wake() = 0;
  /// false: fenced — the node refuses creates (its guests run on); true: registered.
  virtual void set_ready(bool ready) = 0;
};

struct registrar_settings {
  std::string node;             ///< the last segment of the node's key
  std::chrono::seconds ttl{10}; ///< the lease's TTL
  std::function<void(const std::string&)> info;
  std::function<void(const std::string&)> warn;
};

/// Registers the node on a thread of its own (etcd calls block):
/// - **register**: grant a lease of `ttl`, create the node's key under it only if absent
///   (a key still held by another lease — this node's previous incarnation after a kill, or
///   another node given the same name — is waited out: the node stays fenced until that
///   lease expires), then ready.
/// - **keep current**: the record is put again on every change of the node and at least
///   every ttl/3, when the lease is renewed too.
/// - **fence**: when no renewal has succeeded for ¾ of `ttl` (counted from when the last
///   good one was sent, so etcd expires the lease ¼ TTL later at the earliest: time for
///   set_ready(false) to stop the node's shared guests before another node may take them
///   over) or etcd says the lease is gone, the node is fenced (set_ready(false)) and
///   registers again, with a new lease, once etcd answers. Its other guests run on.
/// - **stop**: the lease is revoked (its key goes at once: the node leaves placement).
class node_registrar {
public:
  node_registrar(std::shared_ptr<etcd_client> etcd, registered_node& node,
                 registrar_settings settings);
  /// stop().
  ~node_registrar();
  node_registrar(const node_registrar&) = delete;
  node_registrar& operator=(const node_registrar&) = delete;

  /// Starts the thread; the node is fenced until the first registration succeeds.
  void start();
  /// Ends the thread and revokes the lease (best effort, bounded). Idempotent.
  void stop();

  /// `/guestflow/nodes/<node>`.
  const std::string& key() const noexcept { return key_; }
  /// The lease the node is registered under; 0 while fenced or not registered. Keys that
  /// must go with the node (its persistent guests' owners) hang on it.
  int64_t lease() const noexcept { return live_lease_.load(); }

private:
  using clock = std::chrono::steady_clock;

  void run();
  /// Grants a lease and creates the key under it; true when registered.
  bool register_node();
  /// Renews the lease and puts the record; false when the lease is known to be gone.
  bool refresh();
  void fence(const std::string& why);
  /// How long after the last good renewal was sent the node fences itself: ¾ TTL.
  millis fence_after() const;
  /// A call's deadline: its share of the TTL, and never past the fence.
  millis call_timeout(clock::time_point fence_at) const;
  /// Says `what` unless the last warning was of the same `kind` (etcd down for a while
  /// would repeat it every retry).
  void warn_once(const std::string& kind, const std::string& what);

  std::shared_ptr<etcd_client> etcd_;
  registered_node& node_;
  registrar_settings settings_;
  std::string key_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> live_lease_{0}; ///< lease_ while registered (read by other threads)

  // The thread's own state.
  int64_t lease_ = 0;
  int64_t stale_lease_ = 0;        ///< a lease of this node's that etcd may still hold
  clock::time_point last_renewed_; ///< when the last good grant/renewal was sent
  std::string last_warning_;       ///< its kind
};

} // namespace guestflow::fleet
