#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

/// Service URLs' addressing, free of any HTTP library: which guest and port a request is
/// for — by its path (`/v1/sandboxes/{id}/ports/{port}/{path…}`) or, with an ingress domain
/// D, by its Host (`{port}-{id}.D`, the app at `/`) — what is sent on, and the token it
/// offers.
namespace guestflow::local {

/// The header a service URL's caller sends its guest's ingress secret in.
inline constexpr std::string_view ingress_token_header = "X-Guestflow-Ingress-Token";
/// The cookie `?token=` sets for browsers (HttpOnly, Path = the URL's prefix).
inline constexpr std::string_view ingress_cookie = "guestflow_ingress";

struct ingress_request {
  std::string id;
  uint16_t port = 0;
  /// What the guest is asked for: the path below the prefix and the query, as sent (not
  /// decoded), without the `token` parameter; "/" at least.
  std::string upstream_target;
  /// "/v1/sandboxes/{id}/ports/{port}" (path mode) or "" (Host mode): where the cookie
  /// applies and what a redirect is relative to.
  std::string prefix;
  std::optional<std::string> query_token; ///< `?token=`, decoded
  /// Path mode without the slash after the port: answered with a redirect to the prefix
  /// and a slash, so that the app's relative links resolve below it.
  bool needs_slash = false;
};

/// nullopt: not a service URL (the wire API's routes take the request). A service URL
/// that cannot be one (a port out of range, a malformed escape) is a bad_request failure.
/// `raw_target` is the request line's target; `host` the Host field (its port ignored);
/// `domain` the control plane's --ingress-domain, empty for none.
std::optional<result<ingress_request>>
match_ingress(std::string_view raw_target, std::string_view host, std::string_view domain);

/// The token a request offers: the header, else `?token=`, else the cookie; nullopt when
/// it offers none.
std::optional<std::string> offered_token(std::string_view header,
                                         const std::optional<std::string>& query_token,
                                         std::string_view cookie_field);

/// `Set-Cookie` value for a token passed once as `?token=`.
std::string ingress_cookie_for(const ingress_request& r, const std::string& token);

} // namespace guestflow::local
