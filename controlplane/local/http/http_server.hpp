#pragma once

#include "controlplane/local/http/exec_pump.hpp"
#include "controlplane/local/http/http_options.hpp"
#include "controlplane/local/service/sandbox_service.hpp"

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace guestflow::local {

/// What every connection shares: the domain, the worker pool that runs its blocking
/// calls, the options, and the live execs (killed when the server stops).
struct http_context {
  boost::asio::io_context& io;
  boost::asio::thread_pool& workers;
  sandbox_service& service;
  http_options options;

  std::mutex execs_mu;
  std::vector<std::weak_ptr<exec_pump>> execs;
  void track(const std::shared_ptr<exec_pump>& p);

  /// Proxied service-URL connections per guest (options.max_ingress_connections each).
  std::mutex ingress_mu;
  std::map<std::string, uint32_t> ingress_open;
};

/// An acceptor for TCP or a Unix socket alike.
using acceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol>;

/// Binds and listens (throws boost::system::system_error on failure). Separate from the
/// server because the backend must know the port (guests may never reach it) before the
/// domain, and so the server, exists.
acceptor listen_on(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint);

/// The port an acceptor from listen_on is bound to.
uint16_t bound_port(const acceptor& a);

/// Binds and listens on a Unix socket at `path`, mode 0600: only this user's processes
/// reach it (guests run as another uid, and the path is not in their mount namespace). A
/// stale socket file (nothing accepts on it) is replaced; a live one, or any other file,
/// is refused. Throws boost::system::system_error (or std::runtime_error) on failure.
acceptor listen_unix(boost::asio::io_context& io, const std::string& path);

/// The transport layer: accepts connections (on each acceptor: TCP, and optionally a Unix
/// socket) and serves the wire API with one Beast session per connection, on the
/// io_context's thread(s). Blocking domain calls go to the worker pool; their results are
/// posted back to the session.
class http_server {
public:
  http_server(boost::asio::io_context& io, boost::asio::thread_pool& workers,
              sandbox_service& service, http_options options, std::vector<acceptor> acceptors);

  void start();

  /// Stops accepting and kills every running exec (its guest keeps running).
  void stop();

private:
  void accept(acceptor& a);
  void on_accept(acceptor& a, boost::system::error_code ec,
                 boost::asio::generic::stream_protocol::socket s);
  void serve(boost::asio::generic::stream_protocol::socket s);

  http_context ctx_;
  std::vector<acceptor> acceptors_;
};

} // namespace guestflow::local
