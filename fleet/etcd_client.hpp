#pragma once

#include "messages/error.hpp"
#include "messages/fleet.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// A small blocking client of etcd v3's JSON gateway (etcd 3.4: POST /v3/kv/…, /v3/lease/…),
/// for what a fleet needs: node records under a lease, fleet-wide name claims.
///
/// Blocking by design: call it from a thread of your own, never from an actor handler or an
/// Asio strand. Each call opens its own connection (no shared state but the endpoint list),
/// so the object is safe to use from several threads at once.
namespace guestflow::fleet {

using millis = std::chrono::milliseconds;

struct etcd_endpoint {
  std::string host;
  uint16_t port = 0;
  friend bool operator==(const etcd_endpoint& a, const etcd_endpoint& b) {
    return a.host == b.host && a.port == b.port;
  }
};

/// `etcd://HOST:PORT[,HOST:PORT…]` → the endpoints, in order. Hosts are names or IPv4
/// addresses (`[::1]:2379` for IPv6). bad_request names what is wrong.
result<std::vector<etcd_endpoint>> parse_etcd_url(std::string_view url);

/// What create_if_absent found: `created`, or the key's current holder.
struct claim_outcome {
  bool created = false;
  etcd::key_value current; ///< the key as it is now (ours when created)
};

/// Failures: every endpoint unreachable → unavailable "etcd at h:p,h:p unreachable: …";
/// the deadline passed → transient "etcd … timed out after N ms"; an etcd error answer →
/// not_found (gRPC code 5: an unknown lease), bad_request (3, 9, 11) or unavailable (else),
/// with etcd's message. Endpoints are tried in order starting at the last one that
/// answered; a call moves on to the next one when an endpoint cannot be reached, times out
/// its share of the deadline, or answers 503/gRPC 14 — all within the one deadline. A
/// `timeout` of zero means the client's default.
class etcd_client {
public:
  /// bad_request for a malformed URL.
  static result<std::shared_ptr<etcd_client>> make(std::string_view url,
                                                   millis default_timeout = millis{2'000});

  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  const std::vector<etcd_endpoint>& endpoints() const noexcept;
  /// "etcd://h:p,h:p" (for messages).
  std::string url() const;

  /// A lease of `ttl_seconds`; its ID.
  result<etcd::lease_reply> lease_grant(int64_t ttl_seconds, millis timeout = {});
  /// Renews the lease once; its remaining TTL. not_found when the lease has expired or was
  /// revoked.
  result<int64_t> lease_keepalive(int64_t lease_id, millis timeout = {});
  /// Revokes the lease (its keys go with it); not_found when it is already gone.
  result<bool> lease_revoke(int64_t lease_id, millis timeout = {});

  /// Puts `key` (attached to `lease` when non-zero); the store's new revision.
  result<int64_t> put(std::string_view key, std::string_view value, int64_t lease = 0,
                      millis timeout = {});
  /// The key, or nullopt when absent.
  result<std::optional<etcd::key_value>> get(std::string_view key, millis timeout = {});
  /// Every key starting with `prefix`, in key order.
  result<std::vector<etcd::key_value>> range(std::string_view prefix, millis timeout = {});
  /// One transaction: puts `key` = `value` only if `key` does not exist. A retried call
  /// whose first attempt did land finds its own value and counts as created.
  result<claim_outcome> create_if_absent(std::string_view key, std::string_view value,
                                         int64_t lease = 0, millis timeout = {});
  /// Deletes `key`; true if it existed.
  result<bool> erase(std::string_view key, millis timeout = {});
  /// Deletes `key` only while its value is exactly `value` (a claim erased by its holder
  /// only); true if deleted.
  result<bool> erase_if_value(std::string_view key, std::string_view value,
                              millis timeout = {});

  struct impl;

private:
  explicit etcd_client(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace guestflow::fleet
