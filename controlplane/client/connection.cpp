#include "controlplane/client/connection.hpp"

#include "controlplane/client/tls.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace guestflow::cp {

namespace net = boost::asio;

connection::connection(net::io_context& ioc) {
  plain_.emplace(ioc.get_executor());
}

connection::connection(net::io_context& ioc, net::ssl::context& ctx, const std::string& host,
                       bool verify) {
  tls_ = std::make_unique<tls_stream>(ioc.get_executor(), ctx);
  set_tls_peer(tls_->native_handle(), host, verify);
}

char* connection::tls_buffer() {
  if (!tls_buf_) tls_buf_.reset(new char[tls_buffer_size]);
  return tls_buf_.get();
}

bool connection::reusable() const {
  return sock().is_open() && pending.empty();
}

bool connection::looks_alive() {
  if (!reusable()) return false;
  auto& s = sock();
  // One non-blocking peek (this runs before every pooled request). EAGAIN: nothing to
  // read, peer silent — the healthy idle state. Anything else (EOF, reset, or unsolicited
  // bytes) means the connection cannot carry a clean exchange.
  char byte;
  auto n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void connection::close() noexcept {
  boost::system::error_code err;
  auto& s = sock();
  if (!s.is_open()) return;
  s.shutdown(net::socket_base::shutdown_both, err);
  s.close(err);
}

} // namespace guestflow::cp
