#pragma once

#include "controlplane/local/http/route_table.hpp"
#include "controlplane/local/service/sandbox_service.hpp"
#include "messages/error.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>

/// The wire API's URL space and handlers, free of any HTTP library: target parsing
/// (percent-decoding), the route table of every endpoint, and query validation.
namespace guestflow::local {

/// A request target split into its decoded path and query parameters.
struct request_target {
  std::string path;
  std::map<std::string, std::string> query; ///< last value wins
};

/// Percent-decodes (and, in queries, '+' → ' '); bad_request on a malformed escape.
result<std::string> url_decode(std::string_view s, bool query);

result<request_target> parse_target(std::string_view target);

/// The wire API v1: every endpoint's handler, registered once (routes.cpp); with them
/// `GET /metrics`, the capacity and pools in Prometheus's text format (metrics.hpp).
const route_table& wire_api_routes();

/// `wire_api_routes().match(method, path)`.
route match_route(std::string_view method, std::string_view path);

/// `?status=&limit=&offset=` of GET /v1/sandboxes; bad_request naming the parameter.
result<list_query> parse_list_query(const std::map<std::string, std::string>& query);

/// `?stream=true|false|1|0` (absent → false).
result<bool> parse_stream_flag(const std::map<std::string, std::string>& query);

} // namespace guestflow::local
