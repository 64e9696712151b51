#include "tests/integration/control_plane/http_client.hpp"

#include "common/text.hpp"
#include "controlplane/client/url.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <stdexcept>

namespace guestflow::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

/// Runs the context until the pending operation's handler stored its error code.
error_code run(net::io_context& io) {
  io.restart();
  io.run();
  return {};
}

template<class Fields>
std::map<std::string, std::string> lower_headers(const Fields& f) {
  std::map<std::string, std::string> out;
  for (const auto& h : f)
    out[lower(std::string{h.name_string()})] = std::string{h.value()};
  return out;
}

void connect(net::io_context& io, beast::tcp_stream& s, uint16_t port,
             std::chrono::milliseconds timeout) {
  error_code ec;
  s.expires_after(timeout);
  s.async_connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port},
                  [&](error_code e) { ec = e; });
  run(io);
  if (ec)
    throw std::runtime_error("connect to 127.0.0.1:" + std::to_string(port) + ": " +
                             ec.message());
}

http::request<http::string_body> make_request(const http_client& c, const std::string& method,
                                              const std::string& target,
                                              const std::string& body,
                                              const header_map& headers) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "127.0.0.1:" + std::to_string(c.port()));
  if (!c.api_key().empty()) req.set("X-Api-Key", c.api_key());
  bool chunked = false;
  for (const auto& [k, v] : headers) {
    req.set(k, v);
    chunked = chunked || (beast::iequals(k, "transfer-encoding") && v == "chunked");
  }
  req.body() = body;
  if (chunked)
    req.chunked(true);
  else if (!body.empty() || method == "POST" || method == "PUT")
    req.content_length(body.size());
  return req;
}

} // namespace

http_client::http_client(uint16_t port, std::string api_key)
    : port_(port)
    , api_key_(std::move(api_key)) {}

http_reply http_client::call(const std::string& method, const std::string& target,
                             const std::string& body, const header_map& headers,
                             std::chrono::milliseconds timeout) const {
  net::io_context io;
  beast::tcp_stream s{io};
  connect(io, s, port_, timeout);
  auto req = make_request(*this, method, target, body, headers);
  error_code ec;
  s.expires_after(timeout);
  http::async_write(s, req, [&](error_code e, size_t) { ec = e; });
  run(io);
  // A server may answer (413, 401) and close before taking the whole body: read anyway.
  beast::flat_buffer buf;
  http::response_parser<http::string_body> p;
  p.body_limit(std::numeric_limits<uint64_t>::max());
  error_code rec;
  s.expires_after(timeout);
  http::async_read(s, buf, p, [&](error_code e, size_t) { rec = e; });
  run(io);
  if (rec)
    throw std::runtime_error(method + " " + target + ": " + rec.message() +
                             (ec ? " (write: " + ec.message() + ")" : ""));
  http_reply r;
  r.status = p.get().result_int();
  r.body = std::move(p.get().body());
  r.headers = lower_headers(p.get().base());
  return r;
}

struct http_stream::impl {
  net::io_context io;
  beast::tcp_stream s{io};
  beast::flat_buffer buf;
  http::response_parser<http::buffer_body> p;
  std::string pending;
  std::map<std::string, std::string> headers;
  bool done = false;
  char chunk[8192];
};

http_stream::http_stream(const http_client& client, const std::string& method,
                         const std::string& target, const std::string& body,
                         const header_map& headers)
    : impl_(std::make_unique<impl>()) {
  auto& i = *impl_;
  connect(i.io, i.s, client.port(), std::chrono::seconds{30});
  auto req = make_request(client, method, target, body, headers);
  error_code ec;
  i.s.expires_after(std::chrono::seconds{30});
  http::async_write(i.s, req, [&](error_code e, size_t) { ec = e; });
  run(i.io);
  if (ec) throw std::runtime_error("stream write: " + ec.message());
  i.p.body_limit(std::numeric_limits<uint64_t>::max());
}

http_stream::~http_stream() = default;

void http_stream::ensure_header() const {
  auto& i = *impl_;
  if (i.p.is_header_done()) return;
  error_code ec;
  i.s.expires_after(std::chrono::seconds{60});
  http::async_read_header(i.s, i.buf, i.p, [&](error_code e, size_t) { ec = e; });
  run(i.io);
  if (ec) throw std::runtime_error("stream header: " + ec.message());
  i.headers = lower_headers(i.p.get().base());
}

unsigned http_stream::status() const {
  ensure_header();
  return impl_->p.get().result_int();
}

const std::map<std::string, std::string>& http_stream::headers() const {
  ensure_header();
  return impl_->headers;
}

std::optional<std::string> http_stream::next_line(std::chrono::milliseconds timeout) {
  ensure_header();
  auto& i = *impl_;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (auto nl = i.pending.find('\n'); nl != std::string::npos) {
      auto line = i.pending.substr(0, nl);
      i.pending.erase(0, nl + 1);
      return line;
    }
    if (i.done || i.p.is_done()) {
      i.done = true;
      if (i.pending.empty()) return std::nullopt;
      return std::exchange(i.pending, {});
    }
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::milliseconds{0})
      throw std::runtime_error("no complete line before the deadline; got '" + i.pending + "'");
    i.p.get().body().data = i.chunk;
    i.p.get().body().size = sizeof i.chunk;
    error_code ec;
    i.s.expires_after(std::chrono::duration_cast<std::chrono::milliseconds>(left));
    http::async_read_some(i.s, i.buf, i.p, [&](error_code e, size_t) { ec = e; });
    run(i.io);
    if (ec == http::error::need_buffer) ec = {};
    if (ec == beast::error::timeout)
      throw std::runtime_error("no complete line before the deadline; got '" + i.pending + "'");
    if (ec) throw std::runtime_error("stream read: " + ec.message());
    i.pending.append(i.chunk, sizeof i.chunk - i.p.get().body().size);
  }
}

void http_stream::disconnect() {
  error_code ignored;
  impl_->s.socket().shutdown(tcp::socket::shutdown_both, ignored);
  impl_->s.socket().close(ignored);
}

std::string url_encode(const std::string& s) {
  return cp::percent_encode(s, true);
}

} // namespace guestflow::testing
