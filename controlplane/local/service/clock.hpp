#pragma once

#include <string>

namespace guestflow::local {

/// Now as RFC 3339 UTC with milliseconds ("2026-11-30T09:45:55.123Z"), as the wire carries it.
std::string now_rfc3339();

/// A fresh guest id: "sb-" + 16 hex digits from getrandom(2).
std::string new_guest_id();

/// A fresh ingress secret (a guest's service URLs): 32 bytes from getrandom(2), base64url
/// without padding (43 characters, safe in a header, a query and a cookie).
std::string new_ingress_secret();

} // namespace guestflow::local
