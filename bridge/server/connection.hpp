#pragma once

// The transport's own header (Asio types): server.cpp and connection.cpp only.

#include "bridge/server/server.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace guestflow::bridge {

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::ip::tcp::socket socket, server_context& ctx);

} // namespace guestflow::bridge
