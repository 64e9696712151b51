#pragma once

#include "controlplane/local/http_server.hpp"

#include <boost/asio/ip/tcp.hpp>

namespace guestflow::local {

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::ip::tcp::socket socket, http_context& ctx);

/// Compares an offered API key with the configured one in time independent of where
/// they differ (no early exit), so response timing leaks nothing about the key.
bool same_key(std::string_view offered, std::string_view expected);

} // namespace guestflow::local
