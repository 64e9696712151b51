#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace guestflow::bridge {

/// The bridge's endpoints (bridge/API.md).
enum class endpoint : uint8_t {
  start_run,     ///< POST /v1/runs
  run_events,    ///< GET /v1/runs/{id}/events?from_seq=N
  cancel_run,    ///< DELETE /v1/runs/{id}
  sandbox_run,   ///< POST /v1/sandbox/run
  component_run, ///< POST /v1/components/run
  capabilities,  ///< GET /v1/capabilities
  healthz,       ///< GET /healthz (no token)
  metrics,       ///< GET /metrics
};

/// A request target matched to an endpoint.
struct route {
  enum class outcome : uint8_t { found, not_found, method_not_allowed } kind = outcome::found;
  endpoint ep = endpoint::healthz;
  std::string run_id;    ///< {id} of the run routes
  uint64_t from_seq = 0; ///< run_events' query
  std::string allow;     ///< method_not_allowed: the Allow header
};

/// Matches `method` and `target` (path and query); a malformed query is bad_request.
result<route> match_route(std::string_view method, std::string_view target);

/// The endpoint's label in /metrics.
std::string_view label(endpoint ep) noexcept;

} // namespace guestflow::bridge
