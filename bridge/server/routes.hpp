#pragma once

// The route table: METHOD + path pattern → handler. Each surface's file registers its own
// routes (bridge/server/surfaces/); the connection matches a request against the table and
// hands it to the handler, knowing no endpoint itself.

#include "messages/error.hpp"

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace guestflow::bridge {

class exchange;
struct server_context;

/// The bridge's endpoints (bridge/API.md): each route's identity in /metrics.
enum class endpoint : uint8_t {
  start_run,     ///< POST /v1/runs
  run_events,    ///< GET /v1/runs/{id}/events?from_seq=N
  cancel_run,    ///< DELETE /v1/runs/{id}
  sandbox_run,   ///< POST /v1/sandbox/run
  component_run, ///< POST /v1/components/run
  capabilities,  ///< GET /v1/capabilities
  sessions,      ///< /v1/sessions and everything under it (agent sessions)
  ports,         ///< POST …/ports/{port}: a session's or kept component guest's service URL
  healthz,       ///< GET /healthz (no token)
  metrics,       ///< GET /metrics
};

/// How many endpoints there are (metrics keeps a counter row for each).
inline constexpr size_t endpoint_count = static_cast<size_t>(endpoint::metrics) + 1;

/// The endpoint's label in /metrics.
std::string_view label(endpoint ep) noexcept;

/// What a matched route read from the request target.
class route_params {
public:
  /// The text of the pattern's `{name}` segment ("" when the pattern has none).
  std::string_view path(std::string_view name) const noexcept;
  /// The value of a query number the route declared (0 when the query does not set it).
  uint64_t number(std::string_view name) const noexcept;
  /// The percent-decoded bytes of a query text the route declared (`+` is a space);
  /// nullopt when the query does not set it.
  std::optional<std::string> text(std::string_view name) const;

private:
  friend class route_table;
  std::vector<std::pair<std::string, std::string>> path_;
  std::vector<std::pair<std::string, uint64_t>> numbers_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

/// Serves one matched request: reads it from the exchange and answers through it, now or
/// later (a service answer comes back through `exchange::then`).
using route_handler = std::function<void(exchange&, server_context&)>;

/// The body cap of a call that carries a program (sandbox, component): source code, env
/// and options, never data.
inline constexpr uint64_t call_body_cap = uint64_t{1} << 20;

/// How a route's requests use the runtime's execution slots.
enum class slot_use : uint8_t {
  none,     ///< no run (status, events of a run already admitted, cancel)
  now,      ///< a run that starts at once or not at all (sandbox, component)
  or_queue, ///< a whole-flow run, which may wait in GUESTFLOW_MAX_QUEUED
};

/// One route of the table.
struct route {
  std::string method;  ///< "GET", "POST", "DELETE"
  std::string pattern; ///< "/v1/runs/{id}/events"; `{name}` matches 1–64 of [0-9A-Za-z_-]
  endpoint ep = endpoint::healthz;
  route_handler handler;
  /// Served without the bearer token (only /healthz).
  bool open = false;
  /// Query parameters read as unsigned integers (`from_seq=N`): a malformed one is
  /// bad_request when the request is matched, before anything else looks at it.
  std::vector<std::string> query_numbers;
  /// Query parameters read as percent-decoded bytes (`path=`): a malformed escape is
  /// bad_request when the request is matched.
  std::vector<std::string> query_texts;
  /// The body cap (bridge/API.md, "Limits"): a longer body is 413 — from Content-Length
  /// before any of it is read, or as soon as a chunked body passes it. Unset: none for GET,
  /// HEAD and DELETE, else the server's GUESTFLOW_MAX_BODY_BYTES; never more than that.
  std::optional<uint64_t> max_body_bytes;
  /// Whether the request starts a run that takes an execution slot (GUESTFLOW_MAX_INFLIGHT):
  /// one the runtime could not take now is refused with 429 `capacity` before its body is
  /// read.
  slot_use slots = slot_use::none;
};

/// A request target matched against the table.
struct route_match {
  enum class outcome : uint8_t { found, not_found, method_not_allowed };
  outcome kind = outcome::not_found;
  const route* target = nullptr; ///< found: the route (owned by the table)
  route_params params;           ///< found
  std::string allow;             ///< method_not_allowed: the Allow header (", "-separated)
};

/// Routes in registration order; the first whose pattern and method fit wins. Built once
/// before serving, then only read (from every I/O thread).
class route_table {
public:
  /// Registers a route and returns it (to set `open` or `query_numbers`). Throws
  /// std::logic_error for a second route with the same method and pattern.
  route& add(std::string method, std::string pattern, endpoint ep, route_handler handler);

  /// Matches `method` and `target` (path and query): found, not_found (no pattern fits
  /// the path) or method_not_allowed (a pattern fits, with other methods); a malformed
  /// declared query number is bad_request.
  result<route_match> match(std::string_view method, std::string_view target) const;

  const std::deque<route>& routes() const noexcept { return routes_; }

private:
  std::deque<route> routes_; ///< a deque: route_match points into it
};

} // namespace guestflow::bridge
