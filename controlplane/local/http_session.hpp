#pragma once

#include "controlplane/local/http_server.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace guestflow::local {

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::ip::tcp::socket socket, http_context& ctx);

} // namespace guestflow::local
