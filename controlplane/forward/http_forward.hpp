#pragma once

// One HTTP exchange forwarded from a client connection to an already-connected upstream
// socket, on Beast 1.74 + Asio: the request's body streamed up as it arrives while the
// response is read and streamed down as it arrives, both at once (an app may answer before
// the body ends: an upload is never held whole; chunked and server-sent bodies pass chunk by
// chunk), and an
// `Upgrade` answered 101 spliced byte for byte in both directions until either side closes.
// Shared by the local control plane's service URLs (controlplane/local/http) and `serve`'s
// (bridge/server): the caller authenticates, picks the upstream and connects it (a plain
// stream socket, or TLS over one already through its handshake: an https control plane);
// this unit only moves bytes and strips what must not cross (hop-by-hop fields, the caller's
// credentials).

#include <array>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility> // before Asio (CONTRIBUTING)
#include <vector>

namespace guestflow::forward {

/// An upstream connection: a TCP or Unix-domain stream socket…
using plain_upstream = boost::asio::generic::stream_protocol::socket;
/// …or TLS over one (an https control plane), its handshake done by the caller.
using tls_upstream = boost::asio::ssl::stream<plain_upstream>;

/// What one exchange may do and what it removes on the way up (whatever the upstream).
struct forward_settings {
  /// The request-target sent upstream ("/path?query"): the caller removes its own prefix
  /// and any credential parameter.
  std::string target;
  /// The Host field sent upstream; empty keeps the client's.
  std::string host;
  /// A request body longer than this is refused (Content-Length: before anything is sent;
  /// chunked: when it grows past it, the upstream connection is then dropped).
  uint64_t max_body_bytes = uint64_t{64} << 20;
  /// Neither direction moved a byte this long: both connections are closed (an idle
  /// WebSocket included).
  std::chrono::milliseconds idle_timeout{std::chrono::seconds{120}};
  /// Request fields never forwarded (case-insensitive): the caller's credentials
  /// (Authorization, X-Api-Key, an ingress token header).
  std::vector<std::string> drop_fields;
  /// Cookies removed from the Cookie field (the caller's own token cookie).
  std::vector<std::string> drop_cookies;
};

/// The settings, and what becomes of an upstream of type `Upstream` afterwards.
template<class Upstream>
struct basic_forward_options : forward_settings {
  /// Set: the upstream connection is kept alive (no `Connection: close`), and handed to
  /// this before `done` when the exchange ended with it reusable (the whole response read,
  /// the upstream keeping it open, no upgrade); unset: one exchange per upstream connection.
  std::function<void(Upstream)> keep_upstream;
};

using forward_options = basic_forward_options<plain_upstream>;
using tls_forward_options = basic_forward_options<tls_upstream>;

/// How an exchange ended. `answered`: a response header reached the client, so the caller
/// must not answer; otherwise the caller answers (502 upstream_failed, 413 body_too_large)
/// or closes (client_failed).
struct forward_outcome {
  enum class kind : uint8_t {
    done,            ///< the whole response was sent
    upgraded,        ///< a 101 was sent and the tunnel ran until a side closed
    upstream_failed, ///< the upstream reset or closed before or during its response
    client_failed,   ///< the client went away or sent a malformed body
    body_too_large,  ///< the request body passed max_body_bytes
    timed_out,       ///< idle_timeout passed with no byte moving
  };
  kind what = kind::done;
  bool answered = false;
  /// done only: the client connection may carry another request (its buffer holds any
  /// bytes of it already read).
  bool keep_alive = false;
  /// done only: the whole response went out before the client's request body ended (the
  /// app answered early); the rest of the body is unread, so the caller drains it before
  /// closing (a close with unread bytes resets the connection, and the client may lose the
  /// response).
  bool body_unread = false;
  unsigned status = 0; ///< the upstream's status, when one was read
  std::string error;   ///< what failed, for logs and the caller's answer
};

/// The fields of a request as forwarded: hop-by-hop fields (Connection and those it names,
/// Keep-Alive, Proxy-Connection, Proxy-Authorization, TE, Trailer, Upgrade — the last kept
/// with `Connection: upgrade` when `upgrade` is set), Expect (answered here), the caller's
/// credential fields and cookies removed. Transfer-Encoding and Content-Length stay: they
/// frame the body as it is sent on.
void strip_request_fields(boost::beast::http::fields& f, const forward_settings& o,
                          bool upgrade);

/// The same for a response header (hop-by-hop fields; Upgrade kept on a 101).
void strip_response_fields(boost::beast::http::fields& f, bool upgrade);

/// True when the request asks for a protocol switch that is tunnelled (`Upgrade` present,
/// with `Connection: upgrade`).
bool wants_upgrade(const boost::beast::http::fields& f);

/// Cookie field value minus the named cookies ("" when none is left).
std::string without_cookies(std::string_view cookie, const std::vector<std::string>& names);

namespace detail {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using error_code = boost::system::error_code;

template<class Upstream>
struct is_tls : std::false_type {};
template<class Next>
struct is_tls<net::ssl::stream<Next>> : std::true_type {};

/// A TLS upstream is closed by a close_notify sent (and the peer's awaited at most this
/// long) after the exchange: it never delays the exchange's end.
constexpr auto tls_shutdown_grace = std::chrono::seconds{2};

/// Sends `s`'s close_notify, then closes it (the peer's reply awaited for the grace at most).
inline void shut_down_tls(tls_upstream s) {
  auto held = std::make_shared<tls_upstream>(std::move(s));
  auto timer = std::make_shared<net::steady_timer>(held->get_executor(), tls_shutdown_grace);
  timer->async_wait([held](error_code ec) {
    if (ec) return;
    error_code ignored;
    beast::get_lowest_layer(*held).close(ignored);
  });
  held->async_shutdown([held, timer](error_code) {
    timer->cancel();
    error_code ignored;
    beast::get_lowest_layer(*held).close(ignored);
  });
}

/// The exchange's state; keeps itself alive through its handlers.
template<class Client, class Upstream>
class exchange : public std::enable_shared_from_this<exchange<Client, Upstream>> {
public:
  using upstream_socket = Upstream;
  using steady = std::chrono::steady_clock;
  static constexpr bool tls = is_tls<Upstream>::value;

  exchange(Client& client, beast::flat_buffer& client_buf,
           http::request_parser<http::empty_body>& head, upstream_socket upstream,
           basic_forward_options<Upstream> opts, std::function<void(forward_outcome)> done)
      : client_(client)
      , client_buf_(client_buf)
      , req_parser_(std::move(head))
      , up_(std::move(upstream))
      , opts_(std::move(opts))
      , done_(std::move(done))
      , watchdog_(client.get_executor()) {
    // Beast reads into what the buffer has room for (512 bytes when empty): a 1 KiB body
    // would come up in two reads and go down in two sends, waking the client twice.
    up_buf_.reserve(up_read_size);
  }

  void start() {
    starting_ = true;
    start_exchange();
    starting_ = false;
  }

private:
  void start_exchange() {
    auto& in = req_parser_.get();
    client_version_ = in.version();
    client_keep_alive_ = in.keep_alive();
    head_request_ = in.method() == http::verb::head;
    upgrade_ = wants_upgrade(in);
    if (auto len = req_parser_.content_length(); len && *len > opts_.max_body_bytes)
      return finish(forward_outcome::kind::body_too_large, "request body too large");
    req_parser_.body_limit(opts_.max_body_bytes);
    bool expects_continue = beast::iequals(in[http::field::expect], "100-continue");
    if (req_parser_.is_done() && !upgrade_) return write_bodiless_request();

    req_.base() = in.base();
    req_.target(opts_.target);
    req_.version(11);
    if (!opts_.host.empty()) req_.set(http::field::host, opts_.host);
    strip_request_fields(req_, opts_, upgrade_);
    if (!upgrade_ && !opts_.keep_upstream) // one exchange per upstream connection
      req_.set(http::field::connection, "close");
    req_.body().data = nullptr;
    req_.body().more = !req_parser_.is_done();
    req_sr_.emplace(req_);

    client_.expires_never(); // the watchdog times both sides out together
    touch();
    arm_watchdog();
    if (expects_continue && !req_parser_.is_done()) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_,
                                                                     client_version_);
      return http::async_write(client_, *cont,
                               [self = this->shared_from_this(), cont](error_code ec, size_t) {
                                 if (ec) return self->client_failed(ec);
                                 self->write_request();
                               });
    }
    write_request();
  }

  // ---- request: header, then body as it arrives ------------------------------------------

  /// A request without a body (a GET, the common case on a kept connection): its header
  /// edited in place and sent as one text, without Beast's serializer (whose buffer
  /// machinery was the largest user-space share of a proxied request in the profile).
  void write_bodiless_request() {
    auto& in = req_parser_.get();
    in.target(opts_.target);
    in.version(11);
    if (!opts_.host.empty()) in.set(http::field::host, opts_.host);
    strip_request_fields(in, opts_, false);
    if (!opts_.keep_upstream) in.set(http::field::connection, "close");
    up_head_.clear();
    append(up_head_, in.method_string());
    up_head_ += ' ';
    append(up_head_, in.target());
    up_head_ += " HTTP/1.1\r\n";
    append_fields(up_head_, in);
    client_.expires_never(); // the watchdog times both sides out together
    touch();
    arm_watchdog();
    net::async_write(up_, net::buffer(up_head_),
                     [self = this->shared_from_this()](error_code ec, size_t) {
                       if (self->finished_) return;
                       if (ec) return self->request_write_failed(ec);
                       self->touch();
                       self->request_sent_ = true;
                       self->response_started_ = true;
                       self->read_response_header();
                     });
  }

  static void append(std::string& out, beast::string_view s) { out.append(s.data(), s.size()); }

  /// `f` as header lines, and the blank line that ends a header.
  static void append_fields(std::string& out, const http::fields& f) {
    for (const auto& field : f) {
      append(out, field.name_string());
      out += ": ";
      append(out, field.value());
      out += "\r\n";
    }
    out += "\r\n";
  }

  /// Sends what the request serializer holds (the header, then each body chunk). The
  /// response is read from the header's write on (after the whole request for an upgrade,
  /// whose tunnel takes both connections over): the two directions run at once.
  void write_request() {
    http::async_write(up_, *req_sr_, [self = this->shared_from_this()](error_code ec, size_t) {
      if (ec == http::error::need_buffer) ec = {};
      if (self->finished_) return;
      if (ec) return self->request_write_failed(ec);
      self->touch();
      bool whole = self->req_sr_->is_done();
      if (!self->response_started_ && (whole || !self->upgrade_)) {
        self->response_started_ = true;
        self->read_response_header();
      }
      if (whole) {
        self->request_sent_ = true;
        return;
      }
      self->read_request_body();
    });
  }

  /// The upstream stopped taking the request. Before any response is read it failed; once
  /// the response is being read, the app may have answered early and closed its reading
  /// side: that response decides (the upload stops here, the rest of the body unread).
  void request_write_failed(error_code ec) {
    if (!response_started_) return upstream_failed(ec, "writing the request");
  }

  void read_request_body() {
    if (req_parser_.is_done()) { // the last (empty) write ends a chunked body
      req_.body().data = nullptr;
      req_.body().more = false;
      return write_request();
    }
    auto& body = req_parser_.get().body();
    body.data = up_chunk_.data();
    body.size = up_chunk_.size();
    reading_client_ = true;
    http::async_read_some(client_, client_buf_, req_parser_,
                          [self = this->shared_from_this()](error_code ec, size_t) {
                            self->reading_client_ = false;
                            if (ec == http::error::need_buffer) ec = {};
                            if (self->finished_) return;
                            if (ec == http::error::body_limit)
                              return self->finish(forward_outcome::kind::body_too_large,
                                                  "request body too large");
                            if (ec) return self->client_failed(ec);
                            self->touch();
                            auto n =
                                self->up_chunk_.size() - self->req_parser_.get().body().size;
                            self->req_.body().data = n ? self->up_chunk_.data() : nullptr;
                            self->req_.body().size = n;
                            self->req_.body().more = !self->req_parser_.is_done();
                            if (!n && !self->req_parser_.is_done())
                              return self->read_request_body();
                            self->write_request();
                          });
  }

  // ---- response: header, then body (or the tunnel) ---------------------------------------

  void read_response_header() {
    res_parser_.emplace();
    res_parser_->body_limit(std::numeric_limits<uint64_t>::max()); // Beast 1.74: no none
    if (head_request_) res_parser_->skip(true);
    http::async_read_header(up_, up_buf_, *res_parser_,
                            [self = this->shared_from_this()](error_code ec, size_t) {
                              if (ec) return self->upstream_failed(ec, "reading the response");
                              self->touch();
                              self->on_response_header();
                            });
  }

  void on_response_header() {
    auto& in = res_parser_->get();
    status_ = in.result_int();
    if (status_ / 100 == 1 && status_ != 101) return read_response_header(); // 103 and kin
    bool switching = status_ == 101 && upgrade_;
    if (status_ == 101 && !upgrade_)
      return upstream_failed({}, "101 without an upgrade request");
    if (!switching && !head_request_ && status_ != 204 && status_ != 304 &&
        !res_parser_->chunked())
      if (auto len = res_parser_->content_length(); len && *len <= up_read_size)
        return read_whole_body(static_cast<size_t>(*len));
    res_.base() = in.base();
    res_.version(client_version_);
    strip_response_fields(res_, switching);
    if (switching) {
      res_head_.base() = res_.base();
      return http::async_write(client_, res_head_,
                               [self = this->shared_from_this()](error_code ec, size_t) {
                                 if (ec) return self->client_failed(ec);
                                 self->answered_ = true;
                                 self->touch();
                                 self->splice();
                               });
    }
    bool framed = res_parser_->chunked() || res_parser_->content_length().has_value();
    bool bodiless = head_request_ || status_ == 204 || status_ == 304;
    // An answer before the request's body ended: the connection closes after it (the rest
    // of the body is not read), and says so.
    keep_alive_ = client_keep_alive_ && request_sent_;
    if (!framed && !bodiless) { // read until EOF upstream: re-framed for the client
      if (client_version_ >= 11)
        res_.chunked(true);
      else
        keep_alive_ = false;
    }
    res_.keep_alive(keep_alive_);
    res_.body().data = nullptr;
    res_.body().more = !res_parser_->is_done();
    res_sr_.emplace(res_);
    // Body bytes that came with the header go out in the header's own write: one send and
    // one wake-up of the client instead of two. Only what is already buffered: a stream's
    // header is never held back for its first chunk.
    if (!res_parser_->is_done() && up_buf_.size() > 0) {
      auto& body = res_parser_->get().body();
      body.data = buf_.data();
      body.size = buf_.size();
      error_code ec;
      up_buf_.consume(res_parser_->put(up_buf_.data(), ec));
      if (ec == http::error::need_buffer || ec == http::error::need_more) ec = {};
      if (ec) return upstream_failed(ec, "reading the response body");
      auto n = buf_.size() - body.size;
      res_.body().data = n ? buf_.data() : nullptr;
      res_.body().size = n;
      res_.body().more = !res_parser_->is_done();
      if (n || !res_.body().more) {
        answered_ = true; // the header is in this write: the caller may no longer answer
        return write_response();
      }
    }
    http::async_write_header(client_, *res_sr_,
                             [self = this->shared_from_this()](error_code ec, size_t) {
                               if (ec) return self->client_failed(ec);
                               self->answered_ = true;
                               self->touch();
                               self->read_response_body();
                             });
  }

  /// A small body framed by its Content-Length (at most one read buffer): read whole before
  /// anything goes down, so header and body leave in one write. An app that sends its header
  /// and body in two writes (http.server does) would otherwise wake the proxy's client twice
  /// and cost the proxy a serializer pass and a send more per request. A stream's header is
  /// never held: chunked and unframed bodies, and larger ones, go through on_response_header.
  void read_whole_body(size_t len) {
    if (up_buf_.size() >= len) return write_whole_response(len);
    up_.async_read_some(up_buf_.prepare(len - up_buf_.size()),
                        [self = this->shared_from_this(), len](error_code ec, size_t n) {
                          if (ec) return self->upstream_failed(ec, "reading the response body");
                          self->touch();
                          self->up_buf_.commit(n);
                          self->read_whole_body(len);
                        });
  }

  /// A response framed by its Content-Length and read whole with its header (a small
  /// answer, the common case): its header edited in place and sent with the body in one
  /// write (writev), without Beast's serializer; the body's bytes go from the read buffer
  /// as they are.
  void write_whole_response(size_t len) {
    auto& in = res_parser_->get();
    strip_response_fields(in, false);
    keep_alive_ = client_keep_alive_ && request_sent_; // as on_response_header says
    in.version(client_version_);
    in.keep_alive(keep_alive_);
    down_head_.clear();
    down_head_ += client_version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    down_head_ += std::to_string(status_);
    down_head_ += ' ';
    append(down_head_, in.reason());
    down_head_ += "\r\n";
    append_fields(down_head_, in);
    std::array<net::const_buffer, 2> out{net::buffer(down_head_),
                                         net::buffer(up_buf_.data().data(), len)};
    answered_ = true; // the header is in this write: the caller may no longer answer
    net::async_write(client_, out,
                     [self = this->shared_from_this(), len](error_code ec, size_t) {
                       if (ec) return self->client_failed(ec);
                       self->touch();
                       self->up_buf_.consume(len);
                       self->response_whole_ = true;
                       self->done_whole();
                     });
  }

  void read_response_body() {
    if (res_parser_->is_done()) {
      res_.body().data = nullptr;
      res_.body().more = false;
      return write_response();
    }
    auto& body = res_parser_->get().body();
    body.data = buf_.data();
    body.size = buf_.size();
    http::async_read_some(up_, up_buf_, *res_parser_,
                          [self = this->shared_from_this()](error_code ec, size_t) {
                            if (ec == http::error::need_buffer) ec = {};
                            if (ec)
                              return self->upstream_failed(ec, "reading the response body");
                            self->touch();
                            auto n = self->buf_.size() - self->res_parser_->get().body().size;
                            self->res_.body().data = n ? self->buf_.data() : nullptr;
                            self->res_.body().size = n;
                            self->res_.body().more = !self->res_parser_->is_done();
                            if (!n && !self->res_parser_->is_done())
                              return self->read_response_body();
                            self->write_response();
                          });
  }

  void write_response() {
    http::async_write(client_, *res_sr_,
                      [self = this->shared_from_this()](error_code ec, size_t) {
                        if (ec == http::error::need_buffer) ec = {};
                        if (ec) return self->client_failed(ec);
                        self->touch();
                        if (!self->res_sr_->is_done()) return self->read_response_body();
                        self->done_whole();
                      });
  }

  /// The whole response sent: the upstream connection goes back to the caller when it
  /// can carry another exchange (the whole request went up too). A request body not yet
  /// all read is left to the caller (body_unread; finish() cancels the read in flight).
  void done_whole() {
    if (finished_) return;
    auto& p = *res_parser_;
    if (!request_sent_) {
      keep_alive_ = false;
      body_unread_ = true;
    } else if (opts_.keep_upstream && (response_whole_ || p.is_done()) && p.keep_alive() &&
               up_buf_.size() == 0) {
      opts_.keep_upstream(std::move(up_));
    }
    finish(forward_outcome::kind::done, {});
  }

  // ---- the tunnel after a 101 -------------------------------------------------------------

  /// Bytes either side sent past its header go first, then each direction copies until
  /// its reader sees EOF (passed on as a half-close); both done ends the exchange.
  void splice() {
    pump_up_.resize(tunnel_chunk);
    pump_down_.resize(tunnel_chunk);
    auto up_first = beast::buffers_to_string(client_buf_.data());
    client_buf_.consume(client_buf_.size());
    auto down_first = beast::buffers_to_string(up_buf_.data());
    up_buf_.consume(up_buf_.size());
    relay(up_, pump_up_, std::move(up_first), true);
    relay(client_.socket(), pump_down_, std::move(down_first), false);
  }

  /// Writes `pending` to `to`, then copies from the other side into `chunk` and on.
  template<class To>
  void relay(To& to, std::vector<char>& chunk, std::string pending, bool upward) {
    auto self = this->shared_from_this();
    if (!pending.empty()) {
      auto data = std::make_shared<std::string>(std::move(pending));
      return net::async_write(to, net::buffer(*data),
                              [self, data, &to, &chunk, upward](error_code ec, size_t) {
                                if (ec) return self->tunnel_closed(upward, true);
                                self->touch();
                                self->relay_read(to, chunk, upward);
                              });
    }
    relay_read(to, chunk, upward);
  }

  template<class To>
  void relay_read(To& to, std::vector<char>& chunk, bool upward) {
    auto self = this->shared_from_this();
    if (!upward && tls_ending_) return tunnel_closed(false, false);
    auto on_read = [self, &to, &chunk, upward](error_code ec, size_t n) {
      if (ec) return self->tunnel_closed(upward, !self->clean_end(ec, upward));
      self->touch();
      net::async_write(to, net::buffer(chunk.data(), n),
                       [self, &to, &chunk, upward](error_code ec, size_t) {
                         if (ec) return self->tunnel_closed(upward, true);
                         self->touch();
                         self->relay_read(to, chunk, upward);
                       });
    };
    if (upward)
      client_.socket().async_read_some(net::buffer(chunk), std::move(on_read));
    else
      up_.async_read_some(net::buffer(chunk), std::move(on_read));
  }

  /// A read of the tunnel ended the way a side ends it: EOF; from a TLS upstream also a
  /// close without close_notify, and anything once the client's EOF ended its tunnel.
  bool clean_end(error_code ec, bool upward) const {
    if (ec == net::error::eof) return true;
    if constexpr (tls)
      return !upward && (tls_ending_ || ec == net::ssl::error::stream_truncated);
    return false;
  }

  /// One direction ended: a clean EOF is passed on as a half-close; an error closes both.
  /// TLS has no half-close servers honour: the client's EOF ends a TLS upstream's tunnel
  /// (the read from it is cancelled; finish() sends close_notify).
  void tunnel_closed(bool upward, bool failed) {
    error_code ignored;
    if (failed) {
      close_both();
    } else if (upward) {
      if constexpr (tls) {
        tls_ending_ = true;
        beast::get_lowest_layer(up_).cancel(ignored);
      } else {
        up_.shutdown(net::socket_base::shutdown_send, ignored);
      }
    } else {
      client_.socket().shutdown(net::socket_base::shutdown_send, ignored);
    }
    if (++directions_done_ == 2) finish(forward_outcome::kind::upgraded, {});
  }

  // ---- time and endings ------------------------------------------------------------------

  void touch() { last_ = steady::now(); }

  void arm_watchdog() {
    watchdog_.expires_at(last_ + opts_.idle_timeout);
    watchdog_.async_wait([self = this->shared_from_this()](error_code ec) {
      if (ec || self->finished_) return;
      if (steady::now() - self->last_ < self->opts_.idle_timeout) return self->arm_watchdog();
      self->timed_out_ = true;
      self->close_both(); // every pending operation ends with an error
    });
  }

  void close_both() {
    error_code ignored;
    beast::get_lowest_layer(up_).close(ignored);
    client_.socket().shutdown(net::socket_base::shutdown_both, ignored);
    client_.socket().close(ignored);
  }

  void upstream_failed(error_code ec, const char* during) {
    if (timed_out_) return finish(forward_outcome::kind::timed_out, "idle timeout");
    finish(forward_outcome::kind::upstream_failed,
           std::string{during} + (ec ? ": " + ec.message() : std::string{}));
  }

  void client_failed(error_code ec) {
    if (timed_out_) return finish(forward_outcome::kind::timed_out, "idle timeout");
    finish(forward_outcome::kind::client_failed, ec.message());
  }

  void finish(forward_outcome::kind what, std::string error) {
    if (finished_) return;
    finished_ = true;
    watchdog_.cancel();
    error_code ignored;
    // Nothing in flight on the upstream (the whole request went up, the response or the
    // tunnel ended): a TLS one gets its close_notify.
    close_upstream((what == forward_outcome::kind::done && request_sent_) ||
                   what == forward_outcome::kind::upgraded);
    // The upload's read of the client may be in flight (the response ended first, or
    // failed): the connection is the caller's from here.
    bool cancelled = reading_client_;
    if (cancelled) client_.socket().cancel(ignored);
    forward_outcome o;
    o.what = what;
    o.answered = answered_;
    o.keep_alive = what == forward_outcome::kind::done && keep_alive_;
    o.body_unread = what == forward_outcome::kind::done && body_unread_;
    o.status = status_;
    o.error = std::move(error);
    auto done = std::move(done_);
    // Called here when this runs in a handler with nothing of the exchange's left on the
    // client (the common end: one trip through the scheduler less per request); posted
    // from start() (the caller is not ready for it) and after a cancelled read (its
    // aborted handler goes first).
    if (!starting_ && !cancelled) return done(std::move(o));
    net::post(client_.get_executor(),
              [done = std::move(done), o = std::move(o)]() mutable { done(std::move(o)); });
  }

  /// Closes the upstream unless it was handed back; `idle`: no operation is in flight on
  /// it, so a TLS one can be shut down properly.
  void close_upstream(bool idle) {
    auto& sock = beast::get_lowest_layer(up_);
    if (!sock.is_open()) return;
    if constexpr (tls)
      if (idle) return shut_down_tls(std::move(up_));
    error_code ignored;
    sock.close(ignored);
  }

  static constexpr size_t tunnel_chunk = 16 * 1024;
  static constexpr size_t up_read_size = 16 * 1024;

  Client& client_;
  beast::flat_buffer& client_buf_;
  http::request_parser<http::buffer_body> req_parser_;
  upstream_socket up_;
  basic_forward_options<Upstream> opts_;
  std::function<void(forward_outcome)> done_;
  net::steady_timer watchdog_;
  steady::time_point last_ = steady::now();

  http::request<http::buffer_body> req_;
  std::optional<http::request_serializer<http::buffer_body>> req_sr_;
  beast::flat_buffer up_buf_;
  std::optional<http::response_parser<http::buffer_body>> res_parser_;
  http::response<http::buffer_body> res_;
  std::optional<http::response_serializer<http::buffer_body>> res_sr_;
  http::response<http::empty_body> res_head_;
  /// The response's body chunk in flight; left uninitialised (only bytes just read are
  /// sent): zeroing 64 KiB per exchange showed in the proxy's profile.
  std::array<char, 64 * 1024> buf_;
  /// The request's body chunk in flight (the two directions run at once), the same way.
  std::array<char, 16 * 1024> up_chunk_;
  std::vector<char> pump_up_, pump_down_;

  unsigned client_version_ = 11;
  bool client_keep_alive_ = true;
  bool head_request_ = false;
  bool upgrade_ = false;
  bool keep_alive_ = false;
  bool answered_ = false;
  bool finished_ = false;
  bool starting_ = false; ///< inside start(): finish() posts its callback
  bool timed_out_ = false;
  bool response_started_ = false; ///< the response is being read
  bool request_sent_ = false;     ///< the whole request went up
  bool reading_client_ = false;   ///< the upload's read of the client is in flight
  bool body_unread_ = false;
  bool tls_ending_ = false;     ///< TLS tunnel: the client's EOF ends it
  bool response_whole_ = false; ///< write_whole_response sent it (the parser saw no body)
  std::string up_head_,
      down_head_; ///< the texts of the headers written without Beast's serializer
  unsigned status_ = 0;
  int directions_done_ = 0;
};

} // namespace detail

/// Forwards the request whose header `head` holds (its body not yet read; any of its
/// bytes already read are in `client_buf`; the parser is taken over: moved from) to `upstream`,
/// and the answer back, then calls `done` once, on the client's executor. `client` is a
/// beast::basic_stream (its socket() is used for the tunnel) and `upstream` a connected socket
/// (plain_upstream) or TLS stream (tls_upstream, handshake done) on the same executor (a
/// strand): every handler runs there. `client` and `client_buf` must outlive the call (the
/// caller's connection object holds them, and `done` keeps it alive).
template<class Client, class Upstream>
void forward_exchange(Client& client, boost::beast::flat_buffer& client_buf,
                      boost::beast::http::request_parser<boost::beast::http::empty_body>& head,
                      Upstream upstream, basic_forward_options<Upstream> opts,
                      std::function<void(forward_outcome)> done) {
  std::make_shared<detail::exchange<Client, Upstream>>(
      client, client_buf, head, std::move(upstream), std::move(opts), std::move(done))
      ->start();
}

/// The same, for a caller that hands its parser over as an rvalue (it is moved from either
/// way).
template<class Client, class Upstream>
void forward_exchange(Client& client, boost::beast::flat_buffer& client_buf,
                      boost::beast::http::request_parser<boost::beast::http::empty_body>&& head,
                      Upstream upstream, basic_forward_options<Upstream> opts,
                      std::function<void(forward_outcome)> done) {
  forward_exchange(client, client_buf, head, std::move(upstream), std::move(opts),
                   std::move(done));
}

} // namespace guestflow::forward
