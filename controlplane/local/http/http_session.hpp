#pragma once

#include "controlplane/local/http/http_server.hpp"

#include <boost/asio/generic/stream_protocol.hpp>

namespace guestflow::local {

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::generic::stream_protocol::socket socket, http_context& ctx);

} // namespace guestflow::local
