#include "tests/integration/client/loopback_server.hpp"

#include "common/text.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <optional>
#include <stdexcept>
#include <sys/socket.h>

namespace gft {

namespace net = boost::asio;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = net::ip::tcp;
using boost::system::error_code;

// ---------------------------------------------------------------------------------------
// gate

void gate::open() {
  {
    std::lock_guard<std::mutex> lock(mtx_);
    open_ = true;
  }
  cv_.notify_all();
}

bool gate::is_open() const {
  std::lock_guard<std::mutex> lock(mtx_);
  return open_;
}

bool gate::wait(std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(mtx_);
  cv_.wait_for(lock, max, [&] { return open_ || abandoned_; });
  return open_;
}

// ---------------------------------------------------------------------------------------
// connection_io: one accepted socket, plain or TLS

class connection_io {
public:
  virtual ~connection_io() = default;
  virtual bool handshake() = 0;
  virtual bool read(http::request_parser<http::string_body>& p,
                    boost::beast::flat_buffer& b) = 0;
  virtual bool write_response(http::response<http::string_body>& res) = 0;
  virtual bool write_header(http::response<http::empty_body>& res) = 0;
  virtual bool write_bytes(net::const_buffer b) = 0;
  virtual bool write_chunk(std::string_view data) = 0;
  virtual bool write_last_chunk() = 0;
  virtual tcp::socket& socket() = 0;
  /// The server name the client sent in its TLS hello (SNI); empty without one or TLS.
  virtual std::string server_name() { return {}; }

  /// Wakes a blocked read or write (also from the stopping thread): the connection ends.
  void shut() {
    std::lock_guard<std::mutex> lock(mtx_);
    error_code ignored;
    if (!closed_) socket().shutdown(tcp::socket::shutdown_both, ignored);
  }

  /// Closes the socket; later shut() calls do nothing.
  void close() {
    std::lock_guard<std::mutex> lock(mtx_);
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    closed_ = true;
  }

  loopback_server* server = nullptr;

private:
  std::mutex mtx_;
  bool closed_ = false;
};

namespace {

template<class Stream>
class io_impl final : public connection_io {
public:
  template<class... Args>
  explicit io_impl(Args&&... args)
      : s_(std::forward<Args>(args)...) {}

  bool handshake() override {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      return true;
    } else {
      error_code ec;
      s_.handshake(ssl::stream_base::server, ec);
      return !ec;
    }
  }
  std::string server_name() override {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      return {};
    } else {
      auto* name = SSL_get_servername(s_.native_handle(), TLSEXT_NAMETYPE_host_name);
      return name ? name : "";
    }
  }
  bool read(http::request_parser<http::string_body>& p, boost::beast::flat_buffer& b) override {
    error_code ec;
    http::read(s_, b, p, ec);
    return !ec;
  }
  bool write_response(http::response<http::string_body>& res) override {
    error_code ec;
    http::write(s_, res, ec);
    return !ec;
  }
  bool write_header(http::response<http::empty_body>& res) override {
    error_code ec;
    http::response_serializer<http::empty_body> sr{res};
    http::write_header(s_, sr, ec);
    return !ec;
  }
  bool write_bytes(net::const_buffer b) override {
    error_code ec;
    net::write(s_, b, ec);
    return !ec;
  }
  bool write_chunk(std::string_view data) override {
    error_code ec;
    net::write(s_, http::make_chunk(net::const_buffer(data.data(), data.size())), ec);
    return !ec;
  }
  bool write_last_chunk() override {
    error_code ec;
    net::write(s_, http::make_chunk_last(), ec);
    return !ec;
  }
  tcp::socket& socket() override {
    if constexpr (std::is_same_v<Stream, tcp::socket>)
      return s_;
    else
      return s_.next_layer();
  }

private:
  Stream s_;
};

} // namespace

// ---------------------------------------------------------------------------------------
// exchange

bool exchange::note(bool ok) {
  if (!ok) ++io_.server->write_failures_;
  io_.server->changed();
  return ok;
}

bool exchange::respond(unsigned status, std::string body,
                       std::vector<std::pair<std::string, std::string>> headers,
                       bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, "application/json");
  for (auto& [k, v] : headers)
    res.set(k, v);
  res.keep_alive(keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  responded_ = true;
  keep_alive_ = keep_alive;
  return note(io_.write_response(res));
}

bool exchange::success(std::string_view data_json) {
  return respond(200, "{\"status\":\"success\",\"data\":" + std::string(data_json) + "}");
}

bool exchange::begin_chunked(unsigned status, std::string_view content_type) {
  http::response<http::empty_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, std::string(content_type));
  res.chunked(true);
  responded_ = true;
  return note(io_.write_header(res));
}

bool exchange::chunk(std::string_view data) {
  return note(io_.write_chunk(data));
}

bool exchange::end_chunked() {
  return note(io_.write_last_chunk());
}

bool exchange::begin_sized(unsigned status, uint64_t content_length,
                           std::string_view content_type) {
  http::response<http::empty_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, std::string(content_type));
  res.content_length(content_length);
  responded_ = true;
  return note(io_.write_header(res));
}

bool exchange::raw(std::string_view bytes) {
  return note(io_.write_bytes(net::const_buffer(bytes.data(), bytes.size())));
}

void exchange::close_now() {
  closed_ = true;
  io_.shut();
}

// ---------------------------------------------------------------------------------------
// loopback_server

struct loopback_server::impl {
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::optional<ssl::context> tls;
  std::thread acceptor_thread;

  mutable std::mutex mtx;
  std::condition_variable cv;
  std::map<std::pair<std::string, std::string>, handler> routes;
  handler fallback; ///< for unrouted requests (empty: 404)
  std::map<std::pair<std::string, std::string>, size_t> hits;
  std::vector<http_request> requests;
  std::vector<std::string> server_names; ///< SNI of each completed TLS handshake
  std::vector<std::thread> workers;
  std::vector<std::weak_ptr<connection_io>> live;
  std::vector<std::weak_ptr<gate>> gates;
  uint64_t version = 0;
};

loopback_server::loopback_server()
    : loopback_server(options{}) {}

loopback_server::loopback_server(options opts)
    : impl_(std::make_unique<impl>()) {
  tls_ = opts.tls;
  if (tls_) {
    impl_->tls.emplace(ssl::context::tls_server);
    impl_->tls->use_certificate_chain(net::buffer(opts.cert_pem));
    impl_->tls->use_private_key(net::buffer(opts.key_pem), ssl::context::pem);
  }
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  impl_->acceptor.open(ep.protocol());
  impl_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  impl_->acceptor.bind(ep);
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  impl_->acceptor_thread = std::thread([this] { accept_loop(); });
}

loopback_server::~loopback_server() {
  stop();
}

std::string loopback_server::url() const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_);
}

void loopback_server::route(const std::string& method, const std::string& path, handler h) {
  std::lock_guard<std::mutex> lock(impl_->mtx);
  impl_->routes[{method, path}] = std::move(h);
}

void loopback_server::fallback(handler h) {
  std::lock_guard<std::mutex> lock(impl_->mtx);
  impl_->fallback = std::move(h);
}

std::shared_ptr<gate> loopback_server::make_gate() {
  auto g = std::make_shared<gate>();
  std::lock_guard<std::mutex> lock(impl_->mtx);
  impl_->gates.push_back(g);
  return g;
}

size_t loopback_server::hits(const std::string& method, const std::string& path) const {
  std::lock_guard<std::mutex> lock(impl_->mtx);
  auto i = impl_->hits.find({method, path});
  return i == impl_->hits.end() ? 0 : i->second;
}

std::vector<std::string> loopback_server::server_names() const {
  std::lock_guard<std::mutex> lock(impl_->mtx);
  return impl_->server_names;
}

std::vector<http_request> loopback_server::requests() const {
  std::lock_guard<std::mutex> lock(impl_->mtx);
  return impl_->requests;
}

void loopback_server::changed() {
  {
    std::lock_guard<std::mutex> lock(impl_->mtx);
    ++impl_->version;
  }
  impl_->cv.notify_all();
}

bool loopback_server::wait_until(const std::function<bool()>& pred,
                                 std::chrono::milliseconds max) {
  auto deadline = std::chrono::steady_clock::now() + max;
  std::unique_lock<std::mutex> lock(impl_->mtx);
  for (;;) {
    lock.unlock();
    if (pred()) return true;
    lock.lock();
    auto seen = impl_->version;
    if (!impl_->cv.wait_until(lock, deadline, [&] { return impl_->version != seen; }))
      return false;
  }
}

void loopback_server::accept_loop() {
  for (size_t index = 0;; ++index) {
    tcp::socket sock(impl_->ioc);
    error_code ec;
    impl_->acceptor.accept(sock, ec);
    if (stopping_) return;
    if (ec) continue;
    ++accepted_;
    std::shared_ptr<connection_io> io;
    if (tls_)
      io = std::make_shared<io_impl<ssl::stream<tcp::socket>>>(std::move(sock), *impl_->tls);
    else
      io = std::make_shared<io_impl<tcp::socket>>(std::move(sock));
    io->server = this;
    std::lock_guard<std::mutex> lock(impl_->mtx);
    impl_->live.push_back(io);
    impl_->workers.emplace_back([this, index, io] { serve(index, io); });
    ++impl_->version;
    impl_->cv.notify_all();
  }
}

void loopback_server::serve(size_t index, std::shared_ptr<connection_io> io) {
  if (!io->handshake()) {
    ++tls_failures_;
    ++closed_;
    changed();
    return;
  }
  if (tls_) {
    std::lock_guard<std::mutex> lock(impl_->mtx);
    impl_->server_names.push_back(io->server_name());
  }
  boost::beast::flat_buffer buffer;
  for (size_t nth = 0; !stopping_; ++nth) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(size_t{64} << 20);
    if (!io->read(parser, buffer)) break;
    auto& msg = parser.get();
    http_request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    auto q = req.target.find('?');
    req.path = req.target.substr(0, q);
    req.query = q == std::string::npos ? "" : req.target.substr(q + 1);
    req.body = msg.body();
    for (const auto& f : msg)
      req.headers[guestflow::lower(std::string(f.name_string()))] = std::string(f.value());
    req.connection = index;
    req.nth_on_connection = nth;
    handler h;
    {
      std::lock_guard<std::mutex> lock(impl_->mtx);
      ++impl_->hits[{req.method, req.path}];
      impl_->requests.push_back(req);
      ++impl_->version;
      auto r = impl_->routes.find({req.method, req.path});
      if (r != impl_->routes.end())
        h = r->second;
      else
        h = impl_->fallback;
    }
    impl_->cv.notify_all();
    exchange ex(req, *io);
    if (h)
      h(ex);
    else
      ex.respond(404, R"({"status":"fail","data":{"message":"no route )" + req.method + " " +
                          req.path + "\"}}");
    if (!ex.responded() || ex.closed() || !ex.keep_alive() || !msg.keep_alive()) break;
  }
  io->close();
  ++closed_;
  changed();
}

void loopback_server::stop() {
  if (stopping_.exchange(true)) return;
  {
    // Wake the blocking accept with one last connection.
    net::io_context ioc;
    tcp::socket s(ioc);
    error_code ec;
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_), ec);
    impl_->acceptor_thread.join();
    error_code ignored;
    impl_->acceptor.close(ignored);
  }
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(impl_->mtx);
    for (auto& w : impl_->gates)
      if (auto g = w.lock()) {
        std::lock_guard<std::mutex> glock(g->mtx_);
        g->abandoned_ = true;
        g->cv_.notify_all();
      }
    for (auto& w : impl_->live)
      if (auto io = w.lock()) io->shut();
    workers.swap(impl_->workers);
  }
  for (auto& t : workers)
    t.join();
}

} // namespace gft
