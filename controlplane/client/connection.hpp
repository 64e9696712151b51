#pragma once

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::cp {

/// One keep-alive connection to the control plane: a stream socket (TCP, or a Unix socket
/// for a local control plane) on one I/O lane's io_context (concrete executor: no type-erased
/// dispatch per handler), wrapped in TLS for https. It has no timers of its own: the call using
/// it owns the one deadline timer and closes the socket when it fires. Never used by two calls
/// at once.
class connection {
public:
  using executor = boost::asio::io_context::executor_type;
  /// Generic: one type carries TCP and Unix-domain connections alike.
  using socket =
      boost::asio::basic_stream_socket<boost::asio::generic::stream_protocol, executor>;
  using tls_stream = boost::asio::ssl::stream<socket>;

  /// Plain (loopback http or a Unix socket only; the caller checked).
  explicit connection(boost::asio::io_context& ioc);

  /// TLS with SNI and host-name (or IP-address) verification against `host` when the
  /// context verifies peers.
  connection(boost::asio::io_context& ioc, boost::asio::ssl::context& ctx,
             const std::string& host, bool verify);

  bool tls() const noexcept { return tls_ != nullptr; }

  /// The socket layer: connect, readiness waits, close.
  socket& sock() noexcept { return tls_ ? tls_->next_layer() : *plain_; }
  const socket& sock() const noexcept { return tls_ ? tls_->next_layer() : *plain_; }

  tls_stream& secure() noexcept { return *tls_; }

  /// Read buffer of a TLS connection (a plain one reads into its lane's buffer).
  char* tls_buffer();
  static constexpr size_t tls_buffer_size = 16 * 1024;

  /// Open, with no response bytes left over: what reuse needs without a system call.
  bool reusable() const;

  /// reusable(), and not closed by the server (FIN, RST, or a stray byte such as a TLS
  /// close_notify) while idle: a non-blocking peek, no I/O wait.
  bool looks_alive();

  /// Closes the socket now (no TLS close_notify: the pool never waits on a peer).
  void close() noexcept;

  std::chrono::steady_clock::time_point idle_since{};
  unsigned exchanges = 0; ///< requests this connection carried (diagnostics)
  /// Response bytes read but not yet parsed (a header split across reads); usually empty.
  std::string pending;

private:
  std::optional<socket> plain_;
  /// On the heap: a plain connection (every local one) would otherwise carry the unused
  /// TLS state, and every call in flight holds a connection.
  std::unique_ptr<tls_stream> tls_;
  std::unique_ptr<char[]> tls_buf_;
};

} // namespace guestflow::cp
