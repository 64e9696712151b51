#include "controlplane/local/http/http_server.hpp"

#include "common/accept_loop.hpp"
#include "controlplane/local/http/http_session.hpp"

#include <algorithm>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/socket_base.hpp>
#include <boost/asio/steady_timer.hpp>
#include <memory>
#include <netinet/in.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

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

acceptor listen_on(net::io_context& io, const tcp::endpoint& endpoint) {
  net::generic::stream_protocol::endpoint where{endpoint};
  acceptor a{io};
  a.open(where.protocol());
  a.set_option(net::socket_base::reuse_address(true));
  a.bind(where);
  a.listen(net::socket_base::max_listen_connections);
  a.non_blocking(true); // accept() drains the queue without ever blocking (see accept)
  return a;
}

uint16_t bound_port(const acceptor& a) {
  auto ep = a.local_endpoint();
  // sin_port and sin6_port sit at the same offset, in network order.
  return ntohs(reinterpret_cast<const sockaddr_in*>(ep.data())->sin_port);
}

acceptor listen_unix(net::io_context& io, const std::string& path) {
  net::local::stream_protocol::endpoint local{path};
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw std::runtime_error(path + " exists and is not a socket");
    net::local::stream_protocol::socket probe{io};
    boost::system::error_code refused;
    probe.connect(local, refused);
    if (!refused) throw std::runtime_error("another control plane accepts on " + path);
    ::unlink(path.c_str()); // stale: its server is gone
  }
  net::generic::stream_protocol::endpoint where{local};
  acceptor a{io};
  a.open(where.protocol());
  // Created 0600 by a umask held across the bind alone (start-up, before any other work
  // creates files): there is no moment at which the socket has a wider mode.
  auto old = ::umask(0177);
  boost::system::error_code err;
  a.bind(where, err);
  ::umask(old);
  if (err) throw boost::system::system_error(err, "bind " + path);
  a.listen(net::socket_base::max_listen_connections);
  a.non_blocking(true);
  return a;
}

http_server::http_server(net::io_context& io, net::thread_pool& workers,
                         sandbox_service& service, http_options options,
                         std::vector<acceptor> acceptors)
    : ctx_{io, workers, service, std::move(options), {}, {}}
    , acceptors_(std::move(acceptors)) {}

void http_server::start() {
  for (auto& a : acceptors_)
    accept(a);
}

void http_server::accept(acceptor& a) {
  a.async_accept(
      net::make_strand(ctx_.io),
      [this, &a](boost::system::error_code ec, net::generic::stream_protocol::socket s) {
        on_accept(a, ec, std::move(s));
      });
}

void http_server::on_accept(acceptor& a, boost::system::error_code ec,
                            net::generic::stream_protocol::socket s) {
  if (ec == net::error::operation_aborted || !a.is_open()) return;
  if (!ec) {
    serve(std::move(s));
    // A full Unix accept queue refuses new connections outright.
    accept_queued(
        a, [this] { return net::generic::stream_protocol::socket{net::make_strand(ctx_.io)}; },
        [this](net::generic::stream_protocol::socket next) { serve(std::move(next)); });
  }
  if (auto pause = accept_pause(ec); pause.count() > 0) {
    auto retry = std::make_shared<net::steady_timer>(ctx_.io, pause);
    retry->async_wait([this, &a, retry](boost::system::error_code e) {
      if (!e && a.is_open()) accept(a);
    });
    return;
  }
  accept(a);
}

void http_server::serve(net::generic::stream_protocol::socket s) {
  // Streamed exec writes its header, then each chunk as output comes: Nagle would hold a
  // chunk for the client's delayed ACK.
  boost::system::error_code ignored;
  if (s.local_endpoint(ignored).protocol().family() != AF_UNIX)
    s.set_option(tcp::no_delay(true), ignored);
  serve_connection(std::move(s), ctx_);
}

void http_server::stop() {
  boost::system::error_code ignored;
  for (auto& a : acceptors_)
    a.close(ignored);
  std::lock_guard<std::mutex> lock{ctx_.execs_mu};
  for (auto& w : ctx_.execs)
    if (auto p = w.lock()) p->client_gone();
  ctx_.execs.clear();
}

} // namespace guestflow::local
