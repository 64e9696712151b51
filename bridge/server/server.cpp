#include "bridge/server/server.hpp"

#include "bridge/server/connection.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "common/accept_loop.hpp"

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <thread>
#include <utility> // before the Asio headers (see CONTRIBUTING)
#include <vector>

namespace guestflow::bridge {

namespace net = boost::asio;
using tcp = net::ip::tcp;

struct server::impl {
  impl(service& svc, metrics& stats, server_options opts, const net_address& listen,
       const route_table& routes)
      : ctx{svc, stats, std::move(opts), routes}
      , acceptor(io, tcp::endpoint{net::ip::make_address(listen.host), listen.port},
                 /*reuse_address=*/true) {
    acceptor.non_blocking(true); // accept_queued: an empty queue answers at once
  }

  /// A strand per connection only when several threads run `io`: with one (the default)
  /// it would only add a lock and shared-state copies to every handler.
  net::any_io_executor connection_executor() {
    return ctx.opts.io_threads > 1 ? net::any_io_executor{net::make_strand(io)}
                                   : net::any_io_executor{io.get_executor()};
  }

  void accept() {
    acceptor.async_accept(connection_executor(),
                          [this](boost::system::error_code ec, tcp::socket socket) {
                            on_accept(ec, std::move(socket));
                          });
  }

  void on_accept(boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    if (!ec) {
      serve(std::move(socket));
      accept_queued(
          acceptor, [this] { return tcp::socket{connection_executor()}; },
          [this](tcp::socket next) { serve(std::move(next)); });
    }
    if (auto pause = accept_pause(ec); pause.count() > 0) {
      accept_retry.expires_after(pause);
      accept_retry.async_wait([this](boost::system::error_code e) {
        if (!e && acceptor.is_open()) accept();
      });
      return;
    }
    accept();
  }

  void serve(tcp::socket socket) {
    // A stream writes its head, then events as they happen: Nagle would hold each small
    // chunk for the client's delayed ACK (40 ms).
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    serve_connection(std::move(socket), ctx);
  }

  server_context ctx; ///< first: connections still pending in io use it as io goes away
  net::io_context io;
  tcp::acceptor acceptor;
  net::steady_timer accept_retry{io}; ///< the pause after an accept out of descriptors
  std::vector<std::thread> threads;
  bool stopped = false;
};

server::server(service& svc, metrics& stats, server_options opts, const net_address& listen)
    : server(svc, stats, std::move(opts), listen, api_routes()) {}

server::server(service& svc, metrics& stats, server_options opts, const net_address& listen,
               const route_table& routes)
    : impl_(std::make_unique<impl>(svc, stats, std::move(opts), listen, routes)) {}

server::~server() {
  stop();
}

net_address server::local_address() const {
  auto ep = impl_->acceptor.local_endpoint();
  net_address out;
  out.host = ep.address().to_string();
  out.port = ep.port();
  out.v6 = ep.address().is_v6();
  out.loopback = ep.address().is_loopback();
  return out;
}

void server::start() {
  impl_->accept();
  for (unsigned i = 0; i < std::max(1u, impl_->ctx.opts.io_threads); ++i)
    impl_->threads.emplace_back([this] { impl_->io.run(); });
}

void server::begin_shutdown() {
  impl_->ctx.stopping = true;
  net::post(impl_->io, [s = impl_.get()] {
    boost::system::error_code ignored;
    s->acceptor.close(ignored);
  });
}

int64_t server::answers_owed() const noexcept {
  return impl_->ctx.answers_owed.load();
}

void server::stop() {
  auto& s = *impl_;
  if (s.stopped) return;
  s.stopped = true;
  s.io.stop();
  for (auto& t : s.threads)
    if (t.joinable()) t.join();
  s.threads.clear();
  boost::system::error_code ignored;
  s.acceptor.close(ignored); // no thread runs io any more
  // Connections still waiting in io go when io does (their relays are stopped then).
}

} // namespace guestflow::bridge
