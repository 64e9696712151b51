#pragma once

#include "controlplane/client/client.hpp"
#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <map>
#include <string>
#include <string_view>
#include <variant>

namespace guestflow::cp {

/// "local" | "createos".
std::string_view to_string(provider p) noexcept;

/// No control plane configured: the CLI starts the embedded local one.
struct embedded_endpoint {};

/// Either a configured control plane (`endpoint::kind` tells which provider) or embedded.
using endpoint_choice = std::variant<embedded_endpoint, endpoint>;

/// The environment as a map, so selection is testable without setenv.
using env_map = std::map<std::string, std::string>;

/// Chooses the control plane from the environment (empty or blank values count as unset):
/// 0. `GUESTFLOW_FLEET=etcd://H:P[,H:P…]` → a fleet whose nodes are read from etcd
///    (base_url is the etcd URL; `client::make` builds a fleet client, fleet_client.hpp);
///    with `GUESTFLOW_CONTROL_PLANE_URL` also set → bad_request (ambiguous);
/// 1. `GUESTFLOW_CONTROL_PLANE_URL` (+ `GUESTFLOW_CONTROL_PLANE_KEY`) → provider local
///    (guestflow's own control plane, which reports its capabilities); a comma-separated
///    list `URL1,URL2,…` is a static fleet (each URL checked alone; one key for all);
/// 2. `CREATEOS_SANDBOX_API_KEY`, else `CREATEOS_API_KEY` → provider createos at
///    `CREATEOS_SANDBOX_BASE_URL` (default https://api.sb.createos.sh);
/// 3. neither → embedded.
/// The URL is checked as `client::make` would: malformed → bad_request, plain http to a
/// non-loopback host → policy_refused — so a bad setting fails before any guest is asked for.
result<endpoint_choice> select_endpoint(const env_map& env);

/// The CreateOS default base URL.
inline constexpr std::string_view createos_default_url = "https://api.sb.createos.sh";

/// What CreateOS is known to do: hardware-virtualized, deny-all and address rules
/// enforced, hostname rules NOT enforced, 169.254.0.0/16 reachable. It has no server-side
/// exec timeout (the runtime wraps commands in timeout(1)); the cap is what the
/// auto-pause backstop allows: auto_pause_after_seconds ≤ 86400 must exceed timeout + 120.
capabilities createos_capabilities();

/// The process environment as an env_map (for the CLI; tests pass their own map).
env_map process_environment();

} // namespace guestflow::cp
