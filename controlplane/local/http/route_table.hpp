#pragma once

#include "controlplane/local/http/http_options.hpp"
#include "controlplane/local/http/replies.hpp"
#include "controlplane/local/service/sandbox_service.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

/// The protocol side of the HTTP server, free of any HTTP library: a table of handlers, each
/// registered for a method and a path pattern, and the actions a handler asks the transport
/// (http_session.cpp) to carry out. A handler decodes and validates; the session only reads
/// requests, writes answers and streams.
namespace guestflow::local {

/// The wire API's endpoints, by name (what a route resolved to; tests and logs name them).
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
  warm_pool,      ///< GET /v1/pool (local only: the warm pool's counts)
  capacity,       ///< GET /v1/capacity (local only: budget, committed, drain, fence)
  start_drain,    ///< POST /v1/drain (local only: creates refused, guests run on)
  stop_drain,     ///< DELETE /v1/drain
  stop_sandbox,   ///< POST /v1/sandboxes/{id}/stop (local only: persistent guests)
  start_sandbox,  ///< POST /v1/sandboxes/{id}/start (local only: persistent guests)
  metrics,        ///< GET /metrics (local only: capacity and pools, Prometheus text)
};

/// What a handler sees of a request.
struct handler_request {
  std::string id; ///< the pattern's `{id}` segment, if any
  const std::map<std::string, std::string>& query;
  std::string_view body; ///< the whole body (body_mode::whole), else empty
  sandbox_service& service;
  const http_options& options;
};

// ---- what a handler asks the transport to do ------------------------------------------

/// A domain call, run on a worker thread; what it returns is the answer.
struct domain_call {
  std::function<reply()> run;
  /// Set by a call whose answer alone tells what it made (a create: the id): run on a worker
  /// instead of answering when the caller has left before its answer could be written, so
  /// nothing outlives a caller that never learnt of it (http_session.cpp). Unset: nothing.
  std::function<void()> undo{};
};

/// A command started on a worker thread, its output pumped by the transport: one JSend
/// answer at the end, or (`streaming`) an NDJSON body as output arrives.
struct exec_call {
  std::function<result<std::unique_ptr<running_exec>>()> start;
  bool streaming = false;
};

/// A guest file opened on a worker thread, checked to be a regular file of `size` bytes.
struct opened_file {
  guest_file file;
  uint64_t size = 0;
};

/// The guest file `open` returns, sent as the raw body.
struct file_download {
  std::function<result<opened_file>()> open;
  /// As domain_call::undo, for an `open` that makes something (a fault's cut create answer).
  std::function<void()> undo{};
};

/// The request body, streamed into the guest file `open` returns; the answer names `path`
/// and the bytes written.
struct file_upload {
  std::function<result<guest_file>()> open;
  std::string path;
  /// `open` once a body of this many bytes is known to fit (check_upload_room first), in
  /// one call: how a body read whole before the open is written. Empty: not offered.
  std::function<result<guest_file>(uint64_t)> open_with_room{};
};

/// A reply at once (the request itself is refused), or one of the above.
using action = std::variant<reply, domain_call, exec_call, file_download, file_upload>;

/// How the transport reads the body before calling the handler.
enum class body_mode : uint8_t {
  whole,    ///< read whole, capped at http_options::max_json_bytes
  streamed, ///< not read: the handler's file_upload takes it (capped at max_file_bytes)
};

struct handler {
  body_mode body = body_mode::whole;
  std::function<action(const handler_request&)> handle;
};

/// What a method + path resolves to.
struct route {
  enum class outcome : uint8_t { found, not_found, method_not_allowed };
  outcome kind = outcome::not_found;
  endpoint ep = endpoint::shapes;
  const handler* target = nullptr; ///< found only
  std::string id;                  ///< the {id} segment, if any
  std::string allow;               ///< for 405: the methods the path accepts ("GET, PUT")
};

/// Method + path pattern → handler. A pattern is a path whose `{id}` segment matches any
/// non-empty segment; one trailing slash on a request path is tolerated. A path that
/// matches a pattern but not its methods is 405, listing them in registration order.
/// Every handler is registered wrapped by with_faults (fault_injection.hpp): without an
/// installed injector it runs as given.
class route_table {
public:
  void add(std::string_view method, std::string_view pattern, endpoint name, handler h);
  route match(std::string_view method, std::string_view path) const;

private:
  struct row {
    std::string method;
    endpoint name;
    handler h;
  };
  struct path_pattern {
    std::vector<std::string> segments;
    std::vector<row> rows;
  };
  std::vector<path_pattern> patterns_;
};

} // namespace guestflow::local
