#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::cp {

/// One keep-alive connection to the control plane: a `beast::tcp_stream`, wrapped in TLS
/// for https. Not bound to any strand, so the pool can hand it to any call; the call binds
/// its handlers to its own strand. Never used by two calls at once.
class connection {
public:
  using tls_stream = boost::asio::ssl::stream<boost::beast::tcp_stream>;

  /// Plain TCP (loopback http only; the caller checked).
  explicit connection(boost::asio::io_context& ioc);

  /// TLS with SNI and host-name (or IP-address) verification against `host` when the
  /// context verifies peers.
  connection(boost::asio::io_context& ioc, boost::asio::ssl::context& ctx,
             const std::string& host, bool verify);

  bool tls() const noexcept { return tls_ != nullptr; }

  /// The TCP layer: timeouts (`expires_after`), connect, close.
  boost::beast::tcp_stream& tcp() noexcept {
    return tls_ ? tls_->next_layer() : *plain_;
  }

  tls_stream& secure() noexcept { return *tls_; }

  /// Calls `f` with the stream the HTTP layer reads and writes (plain or TLS).
  template <class F>
  decltype(auto) visit(F&& f) {
    if (tls_)
      return f(*tls_);
    return f(*plain_);
  }

  /// A pooled connection the server closed (FIN, RST, or a stray byte such as a TLS
  /// close_notify) while idle is not worth a request: non-blocking peek, no I/O wait.
  bool looks_alive();

  /// Closes the socket now (no TLS close_notify: the pool never waits on a peer).
  void close() noexcept;

  std::chrono::steady_clock::time_point idle_since{};
  unsigned exchanges = 0; ///< requests this connection carried (diagnostics)

private:
  std::optional<boost::beast::tcp_stream> plain_;
  /// On the heap: a plain connection (every local one) would otherwise carry 350 unused
  /// bytes, and every call in flight holds a connection.
  std::unique_ptr<tls_stream> tls_;
};

} // namespace guestflow::cp
