#include "tests/integration/bridge/tls_front.hpp"

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility> // before the Asio headers (see CONTRIBUTING)
#include <vector>

namespace guestflow::testing {

namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

test_cert make_test_cert(const std::string& common_name, const std::string& subject_alt_names) {
  return test_support::make_self_signed(subject_alt_names, common_name);
}

namespace {

/// One client connection: TLS from the client, plain TCP to the control plane.
class relay : public std::enable_shared_from_this<relay> {
public:
  relay(tcp::socket s, std::shared_ptr<ssl::context> ctx, uint16_t upstream,
        std::atomic<size_t>& relayed, std::atomic<size_t>& refused)
      : ctx_(std::move(ctx))
      , client_(std::move(s), *ctx_)
      , up_(client_.get_executor())
      , upstream_(upstream)
      , relayed_(relayed)
      , refused_(refused) {}

  void start() {
    client_.async_handshake(
        ssl::stream_base::server, [self = shared_from_this()](error_code ec) {
          if (ec) {
            ++self->refused_;
            return self->close();
          }
          self->up_.async_connect({net::ip::make_address("127.0.0.1"), self->upstream_},
                                  [self](error_code ec) {
                                    if (ec) return self->close();
                                    ++self->relayed_;
                                    self->from_client();
                                    self->from_upstream();
                                  });
        });
  }

private:
  void from_client() {
    client_.async_read_some(
        net::buffer(up_buf_), [self = shared_from_this()](error_code ec, size_t n) {
          if (ec) {
            self->client_done_ = true;
            if (self->upstream_done_) return self->shut_down();
            error_code ignored;
            self->up_.shutdown(tcp::socket::shutdown_send, ignored); // a half-close, passed on
            return;
          }
          net::async_write(self->up_, net::buffer(self->up_buf_.data(), n),
                           [self](error_code ec, size_t) {
                             if (ec) return self->close();
                             self->from_client();
                           });
        });
  }

  void from_upstream() {
    up_.async_read_some(
        net::buffer(down_buf_), [self = shared_from_this()](error_code ec, size_t n) {
          if (ec) { // the control plane closed: close_notify to the client once its read ends
            self->upstream_done_ = true;
            if (self->client_done_) return self->shut_down();
            error_code ignored;
            self->client_.lowest_layer().cancel(ignored);
            return;
          }
          net::async_write(self->client_, net::buffer(self->down_buf_.data(), n),
                           [self](error_code ec, size_t) {
                             if (ec) return self->close();
                             self->from_upstream();
                           });
        });
  }

  void shut_down() {
    client_.async_shutdown([self = shared_from_this()](error_code) { self->close(); });
  }

  void close() {
    error_code ignored;
    client_.lowest_layer().close(ignored);
    up_.close(ignored);
  }

  std::shared_ptr<ssl::context> ctx_;
  ssl::stream<tcp::socket> client_;
  tcp::socket up_;
  uint16_t upstream_;
  std::atomic<size_t>& relayed_;
  std::atomic<size_t>& refused_;
  std::array<char, 16 * 1024> up_buf_{}, down_buf_{};
  bool client_done_ = false, upstream_done_ = false;
};

std::shared_ptr<ssl::context> server_context(const test_cert& cert) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  ctx->use_certificate_chain(net::buffer(cert.cert_pem));
  ctx->use_private_key(net::buffer(cert.key_pem), ssl::context::pem);
  return ctx;
}

} // namespace

struct tls_front::impl {
  net::io_context io{1};
  tcp::acceptor acceptor{io, {net::ip::make_address("127.0.0.1"), 0}};
  uint16_t upstream = 0;
  std::mutex mu;
  std::shared_ptr<ssl::context> ctx;
  std::atomic<size_t> relayed{0}, refused{0};
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket s) {
      if (ec) return;
      std::shared_ptr<ssl::context> now;
      {
        std::lock_guard lock{mu};
        now = ctx;
      }
      std::make_shared<relay>(std::move(s), std::move(now), upstream, relayed, refused)
          ->start();
      accept();
    });
  }
};

tls_front::tls_front(uint16_t upstream_port, const test_cert& cert)
    : impl_(std::make_unique<impl>()) {
  impl_->upstream = upstream_port;
  impl_->ctx = server_context(cert);
  impl_->accept();
  impl_->thread = std::thread{[this] { impl_->io.run(); }};
}

tls_front::~tls_front() {
  impl_->io.stop();
  impl_->thread.join();
}

uint16_t tls_front::port() const {
  return impl_->acceptor.local_endpoint().port();
}

void tls_front::present(const test_cert& cert) {
  auto ctx = server_context(cert);
  std::lock_guard lock{impl_->mu};
  impl_->ctx = std::move(ctx);
}

size_t tls_front::relayed() const {
  return impl_->relayed.load();
}

size_t tls_front::refused() const {
  return impl_->refused.load();
}

} // namespace guestflow::testing
