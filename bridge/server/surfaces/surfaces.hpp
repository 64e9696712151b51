#pragma once

// Each surface of bridge/API.md registers its own routes, from its own file here.

#include "bridge/server/routes.hpp"

namespace guestflow::bridge {

/// POST /v1/runs, GET /v1/runs/{id}/events, DELETE /v1/runs/{id} (runs.cpp).
void add_run_routes(route_table& t);
/// POST /v1/sandbox/run (sandbox.cpp).
void add_sandbox_routes(route_table& t);
/// POST /v1/components/run (components.cpp).
void add_component_routes(route_table& t);
/// GET /v1/capabilities (capabilities.cpp).
void add_capabilities_routes(route_table& t);
/// GET /healthz, the one route without the token (health.cpp).
void add_health_routes(route_table& t);
/// GET /metrics (metrics.cpp).
void add_metrics_routes(route_table& t);
/// /v1/sessions: agent sessions, their commands and files (sessions.cpp).
void add_session_routes(route_table& t);

/// POST /v1/sessions/{id}/ports/{port}: a session port's service URL (ports.cpp; the URL
/// itself is served by the transport, connection.cpp).
void add_port_routes(route_table& t);

/// Every route of bridge/API.md, built once.
const route_table& api_routes();

} // namespace guestflow::bridge
