#pragma once

// An IP endpoint without Asio: what a listening command parses from `--listen` and what a
// server reports back, so that a header apps/ includes can name an address while Boost.Asio
// stays inside the transports (bridge/server, controlplane/), which convert at their edge.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace guestflow {

struct net_address {
  std::string host;      ///< a canonical IP literal without brackets: "127.0.0.1", "::1"
  uint16_t port = 0;     ///< 0 when listening: any free port
  bool v6 = false;       ///< host is an IPv6 literal
  bool loopback = false; ///< 127.0.0.0/8 or ::1

  /// `host` as it goes in a URL: an IPv6 literal in brackets.
  std::string url_host() const;
  /// "127.0.0.1:8470", "[::1]:8470".
  std::string to_string() const;

  friend bool operator==(const net_address& a, const net_address& b) {
    return a.host == b.host && a.port == b.port && a.v6 == b.v6 && a.loopback == b.loopback;
  }
  friend bool operator!=(const net_address& a, const net_address& b) { return !(a == b); }
};

/// An IP literal (IPv4 dotted quad, or IPv6 with an optional `%scope`) and a port; nullopt
/// when `ip` is not an IP literal (host names are not resolved here). The host is stored in
/// canonical form ("0:0::1" becomes "::1"), as inet_ntop and Asio print it.
std::optional<net_address> make_net_address(std::string_view ip, uint16_t port);

/// `HOST:PORT`, `[V6]:PORT` or `localhost:PORT` (= 127.0.0.1). On failure nullopt, and
/// `why` (when given) says what is wrong without naming the flag: "expected HOST:PORT, got
/// 'x'", "bad port 'x'", "'x' is not an IP address".
std::optional<net_address> parse_host_port(std::string_view text, std::string* why = nullptr);

} // namespace guestflow
