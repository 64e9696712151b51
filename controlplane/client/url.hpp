#pragma once

#include "messages/error.hpp"

#include <boost/asio/ip/address.hpp>
#include <cstdint>
#include <string>
#include <string_view>

namespace guestflow::cp {

/// A control-plane base URL taken apart once, so every request reuses the pieces.
struct base_url {
  bool tls = false;        ///< https
  std::string host;        ///< lower-case; IPv6 without brackets ("::1")
  uint16_t port = 0;       ///< explicit or the scheme default
  std::string prefix;      ///< path before "/v1/…", no trailing '/' ("" or "/api")
  std::string host_header; ///< the Host header: host[:port] (brackets for IPv6)
  /// `unix:///path`: the Unix domain socket to connect to (host "localhost", no TLS).
  std::string socket_path;

  /// "scheme://host[:port]" or "unix://PATH" (no prefix), for messages.
  std::string origin() const;
};

/// Parses `http[s]://host[:port][/prefix]` or `unix:///absolute/path.sock` (a local
/// control plane's socket: no TCP stack, no port anyone else can reach). Refuses
/// (bad_request) other schemes, user info, query, fragment, an empty host, a port outside
/// 1–65535 and a socket path that is relative or longer than the kernel takes.
result<base_url> parse_base_url(std::string_view text);

/// True for `localhost`, 127.0.0.0/8, ::1 and ::ffff:127.0.0.0/104 — the only hosts plain
/// http may be used with (CONTRIBUTING: fail closed).
bool is_loopback_host(std::string_view host);

/// True for 127.0.0.0/8, ::1 and IPv4-mapped 127.0.0.0/8: what a plain-http host may
/// resolve to.
bool is_loopback_address(const boost::asio::ip::address& a);

/// True when `host` is an IPv4 or IPv6 literal (no SNI, IP-address verification).
bool is_ip_literal(std::string_view host);

/// Percent-encodes `s` for a query value or path segment: everything except RFC 3986
/// unreserved characters, and except '/' when `keep_slash` (absolute file paths).
std::string percent_encode(std::string_view s, bool keep_slash = false);

} // namespace guestflow::cp
