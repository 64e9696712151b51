#pragma once

#include "bridge/server/metrics.hpp"
#include "bridge/server/service.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace guestflow::bridge {

struct server_options {
  std::string token;                             ///< empty: no authentication
  uint64_t max_body_bytes = uint64_t{64} << 20;  ///< GUESTFLOW_MAX_BODY_BYTES
  std::chrono::seconds client_timeout{30};       ///< GUESTFLOW_CLIENT_TIMEOUT_SECONDS
  size_t stream_backlog_bytes = size_t{8} << 20; ///< a stream's unsent bytes before a drop
  std::chrono::seconds heartbeat{15};            ///< GUESTFLOW_STREAM_HEARTBEAT_SECONDS
  unsigned io_threads = 1;                       ///< GUESTFLOW_SERVE_IO_THREADS
  const call_latency* cp_latency = nullptr;  ///< rendered in /metrics when set
};

/// What every connection shares.
struct server_context {
  service& svc;
  metrics& stats;
  server_options opts;
};

/// The transport layer: accepts on its own I/O threads and serves bridge/API.md with one
/// Beast session per connection. Every domain call is asynchronous (the service answers
/// on an actor thread; the session hops back onto its strand), so a thousand open streams
/// cost sockets and buffers, not threads.
class server {
public:
  /// Binds `endpoint` (port 0 picks one); throws boost::system::system_error on failure.
  server(service& svc, metrics& stats, server_options opts,
         const boost::asio::ip::tcp::endpoint& endpoint);
  ~server();

  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The bound address (the real port).
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  /// Starts accepting on `io_threads` threads.
  void start();

  /// Stops accepting, closes every connection and joins the threads. Idempotent.
  void stop();

private:
  void accept();

  server_context ctx_; ///< first: connections still pending in io_ use it as io_ goes away
  boost::asio::io_context io_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;
};

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::ip::tcp::socket socket, server_context& ctx);

} // namespace guestflow::bridge
