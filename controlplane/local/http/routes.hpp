#pragma once

#include "controlplane/local/service/sandbox_service.hpp"
#include "messages/error.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>

/// The wire API's URL space, free of any HTTP library: target parsing (percent-decoding),
/// route matching (404 vs 405) and query validation.
namespace guestflow::local {

enum class endpoint : uint8_t {
  shapes,         ///< GET /v1/shapes
  capabilities,   ///< GET /v1/capabilities
  whoami,         ///< GET /v1/whoami
  list_sandboxes, ///< GET /v1/sandboxes
  create_sandbox, ///< POST /v1/sandboxes
  get_sandbox,    ///< GET /v1/sandboxes/{id}
  delete_sandbox, ///< DELETE /v1/sandboxes/{id}
  exec,           ///< POST /v1/sandboxes/{id}/exec[?stream=true]
  put_file,       ///< PUT /v1/sandboxes/{id}/files?path=
  get_file,       ///< GET /v1/sandboxes/{id}/files?path=
  get_egress,     ///< GET /v1/sandboxes/{id}/egress
  put_egress,     ///< PUT /v1/sandboxes/{id}/egress
  pause,          ///< POST /v1/sandboxes/{id}/pause
  resume,         ///< POST /v1/sandboxes/{id}/resume
  list_images,    ///< GET /v1/images
  add_image,      ///< POST /v1/images
  delete_image,   ///< DELETE /v1/images/{name} (the name is the route's id)
};

/// A request target split into its decoded path and query parameters.
struct request_target {
  std::string path;
  std::map<std::string, std::string> query; ///< last value wins
};

/// Percent-decodes (and, in queries, '+' → ' '); bad_request on a malformed escape.
result<std::string> url_decode(std::string_view s, bool query);

result<request_target> parse_target(std::string_view target);

/// What a method + path resolves to.
struct route {
  enum class outcome : uint8_t { found, not_found, method_not_allowed };
  outcome kind = outcome::not_found;
  endpoint ep = endpoint::shapes;
  std::string id;    ///< the {id} segment, if any
  std::string allow; ///< for 405: the methods the path accepts ("GET, PUT")
};

route match_route(std::string_view method, std::string_view path);

/// Does the endpoint take a JSON request body (read whole, size-capped)?
bool takes_json_body(endpoint ep);

/// `?status=&limit=&offset=` of GET /v1/sandboxes; bad_request naming the parameter.
result<list_query> parse_list_query(const std::map<std::string, std::string>& query);

/// `?stream=true|false|1|0` (absent → false).
result<bool> parse_stream_flag(const std::map<std::string, std::string>& query);

} // namespace guestflow::local
