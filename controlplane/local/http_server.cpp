#include "controlplane/local/http_server.hpp"

#include "controlplane/local/http_session.hpp"

#include <algorithm>
#include <boost/asio/socket_base.hpp>

namespace guestflow::local {

namespace net = boost::asio;
using tcp = net::ip::tcp;

void http_context::track(const std::shared_ptr<exec_pump>& p) {
  std::lock_guard<std::mutex> lock{execs_mu};
  execs.erase(std::remove_if(execs.begin(), execs.end(),
                             [](const std::weak_ptr<exec_pump>& w) { return w.expired(); }),
              execs.end());
  execs.push_back(p);
}

tcp::acceptor listen_on(net::io_context& io, const tcp::endpoint& endpoint) {
  tcp::acceptor acceptor{io};
  acceptor.open(endpoint.protocol());
  acceptor.set_option(net::socket_base::reuse_address(true));
  acceptor.bind(endpoint);
  acceptor.listen(net::socket_base::max_listen_connections);
  return acceptor;
}

http_server::http_server(net::io_context& io, net::thread_pool& workers,
                         sandbox_service& service, http_options options, tcp::acceptor acceptor)
    : ctx_{io, workers, service, std::move(options), {}, {}}
    , acceptor_(std::move(acceptor)) {}

void http_server::start() {
  accept();
}

void http_server::accept() {
  acceptor_.async_accept(net::make_strand(ctx_.io),
                         [this](boost::system::error_code ec, tcp::socket socket) {
                           if (ec == net::error::operation_aborted || !acceptor_.is_open())
                             return;
                           if (!ec) {
                             // Streamed exec writes its header, then each chunk as output
                             // comes: Nagle would hold a chunk for the client's delayed ACK.
                             boost::system::error_code ignored;
                             socket.set_option(tcp::no_delay(true), ignored);
                             serve_connection(std::move(socket), ctx_);
                           }
                           accept();
                         });
}

void http_server::stop() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  std::lock_guard<std::mutex> lock{ctx_.execs_mu};
  for (auto& w : ctx_.execs)
    if (auto p = w.lock()) p->client_gone();
  ctx_.execs.clear();
}

} // namespace guestflow::local
