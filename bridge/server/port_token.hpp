#pragma once

// The tokens of service URLs (bridge/API.md, "Service URLs"): `serve` hands out a URL that
// reaches one port of one guest until it expires, and checks it on every proxied request
// without keeping any state — the token carries what it grants, signed with a key only
// this server holds.

#include "messages/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace guestflow::bridge {

/// What a token grants: `port` of guest `guest_id` until `expires_at` (Unix seconds).
struct port_grant {
  std::string guest_id;
  uint16_t port = 0;
  int64_t expires_at = 0;
};

/// Signs and checks grants: `GUEST.PORT.EXPIRY.MAC`, MAC an HMAC-SHA256 (128 bits, hex) over
/// the three fields with a per-server key. A restarted server draws a new key: its
/// earlier URLs stop working (they are short-lived by design).
class port_signer {
public:
  /// A signer with a fresh random key (32 bytes from the OS).
  port_signer();
  /// A signer with `key` (tests: two servers that share a key accept each other's tokens).
  explicit port_signer(std::string key);

  /// The token for `g`. A guest id holds [A-Za-z0-9_-] only (a control plane's ids do).
  std::string sign(const port_grant& g) const;

  /// The grant of `token` if its MAC is this key's and it has not expired at `now` (Unix
  /// seconds); else policy_refused saying which ("malformed", "wrong", "expired") — the
  /// transport answers it 401.
  result<port_grant> verify(std::string_view token, int64_t now) const;

private:
  std::string mac(std::string_view fields) const;
  std::string key_;
};

/// Whether `id` can travel in a token (and a URL path) as is.
bool token_safe_id(std::string_view id) noexcept;

} // namespace guestflow::bridge
