#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <string>

namespace guestflow::cp {

/// CreateOS's own public URL for `port` of guest `v` (a `GET /v1/sandboxes/{id}` view), built
/// as CreateOS's SDK builds it with `sandbox.previewUrl(port, {scheme: "http"})`: the view's
/// `ingress_url_template` with its literal `<port>` replaced by the port, and a leading
/// `https:` made `http:`. Plain http because CreateOS's how-to says so: its wildcard ingress
/// domain may have no TLS certificate yet, and http is redirected to https once it has.
/// The URL is public (CreateOS documents no auth on it) and reaches the port on the guest's
/// eth0, not loopback: the program must listen on 0.0.0.0. Sources:
/// tests/integration/bridge/createos/SOURCES.md.
/// `unavailable` when the guest has no ingress (created without `ingress_enabled`, or
/// CreateOS knows no public domain for it) or the template is not an http(s) URL with a
/// `<port>`: never a URL made up here.
result<std::string> createos_preview_url(const sandbox_view& v, uint16_t port);

} // namespace guestflow::cp
