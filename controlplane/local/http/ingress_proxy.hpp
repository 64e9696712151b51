#pragma once

#include "controlplane/local/http/http_server.hpp"
#include "controlplane/local/http/ingress_route.hpp"

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <optional>
#include <string>

/// A service URL's request on a control-plane connection: authorized (the API key, or the
/// guest's ingress secret), its guest found and woken (sandbox_service::open_ingress), a
/// socket made in the guest's network namespace connected to its port on the guest's own
/// loopback, then the exchange forwarded (controlplane/forward/http_forward.hpp).
namespace guestflow::local {

using client_stream = boost::beast::basic_stream<boost::asio::generic::stream_protocol>;

/// A connection's upstream connection kept from its last service-URL request (the guest's
/// server kept it alive): the next request for the same guest and port reuses it after a
/// lookup (sandbox_service::ingress_ready) instead of a worker's netns entry and a connect.
struct ingress_cache {
  std::string id;
  uint16_t port = 0;
  std::optional<boost::asio::generic::stream_protocol::socket> upstream;
};

/// What the connection does after a service URL's request.
enum class after_ingress : uint8_t {
  next,   ///< read the next request (its bytes may already be in the buffer)
  linger, ///< answered early with the body unread: stop sending, drain, close
  close,  ///< close now
};

/// Serves the request whose header `head` holds (body unread) as the service URL `req`,
/// then calls `then` once, on the connection's executor. `stream`, `buf` and `cache` are
/// the connection's and must outlive the call (`then` keeps the connection alive).
void serve_ingress(client_stream& stream, boost::beast::flat_buffer& buf,
                   boost::beast::http::request_parser<boost::beast::http::empty_body>& head,
                   ingress_request req, http_context& ctx, ingress_cache& cache,
                   std::function<void(after_ingress)> then);

} // namespace guestflow::local
