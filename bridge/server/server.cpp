#include "bridge/server/server.hpp"

#include <boost/asio/strand.hpp>

namespace guestflow::bridge {

namespace net = boost::asio;
using tcp = net::ip::tcp;

server::server(service& svc, metrics& stats, server_options opts, const tcp::endpoint& endpoint)
    : ctx_{svc, stats, std::move(opts)}
    , acceptor_(io_, endpoint, /*reuse_address=*/true) {}

server::~server() {
  stop();
}

tcp::endpoint server::local_endpoint() const {
  return acceptor_.local_endpoint();
}

void server::start() {
  accept();
  for (unsigned i = 0; i < std::max(1u, ctx_.opts.io_threads); ++i)
    threads_.emplace_back([this] { io_.run(); });
}

void server::accept() {
  acceptor_.async_accept(net::make_strand(io_),
                         [this](boost::system::error_code ec, tcp::socket socket) {
                           if (ec == net::error::operation_aborted || !acceptor_.is_open())
                             return;
                           if (!ec) {
                             // A stream writes its head, then events as they happen: Nagle
                             // would hold each small chunk for the client's delayed ACK (40
                             // ms).
                             boost::system::error_code ignored;
                             socket.set_option(tcp::no_delay(true), ignored);
                             serve_connection(std::move(socket), ctx_);
                           }
                           accept();
                         });
}

void server::stop() {
  if (stopped_) return;
  stopped_ = true;
  io_.stop();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
  boost::system::error_code ignored;
  acceptor_.close(ignored); // no thread runs io_ any more
  // Connections still waiting in io_ go when io_ does (their relays are stopped then).
}

} // namespace guestflow::bridge
