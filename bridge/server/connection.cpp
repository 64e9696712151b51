#include "bridge/server/server.hpp"
#include "bridge/server/status.hpp"
#include "messages/bridge.hpp"
#include "messages/secret.hpp"
#include "messages/type_ids.hpp"

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <deque>
#include <limits>
#include <optional>
#include <utility> // before the Asio headers (see CONTRIBUTING)

namespace guestflow::bridge {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

/// Beast 1.74 speaks boost::string_view.
std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

bool authorized(std::string_view header, const std::string& token) {
  constexpr std::string_view scheme = "bearer ";
  if (header.size() < scheme.size() ||
      !beast::iequals(beast::string_view{header.data(), scheme.size()},
                      beast::string_view{scheme.data(), scheme.size()}))
    return false;
  return same_secret(header.substr(scheme.size()), token);
}

/// How long a write may be in flight before the events queued behind it count as a backlog.
constexpr auto stall_grace = std::chrono::seconds{1};

/// `n` as the hex size line of one HTTP chunk.
std::string chunk_size_line(size_t n) {
  char buf[24];
  auto len = std::snprintf(buf, sizeof buf, "%zx\r\n", n);
  return std::string(buf, static_cast<size_t>(len));
}

class connection;

/// The run subscriber of one connection: encodes each event on the actor's thread (so the
/// I/O thread only writes) and hands it to the connection's strand; quits after the
/// terminal event or once the connection is gone — which the run sees as a disconnect.
run_subscriber_actor::behavior_type relay(run_subscriber_actor::pointer self,
                                          std::weak_ptr<connection> conn, bool lines);

/// One HTTP connection. Requests are read one at a time; a run's answer (streamed or
/// collected) ends the connection (`Connection: close`), so a socket read can watch for
/// the client going away while the run goes on.
class connection : public std::enable_shared_from_this<connection> {
public:
  connection(tcp::socket socket, server_context& ctx)
      : stream_(std::move(socket))
      , ctx_(ctx)
      , linger_(stream_.get_executor())
      , heartbeat_(stream_.get_executor()) {}

  ~connection() {
    stop_relay();
    if (streaming_) ctx_.stats.streams(-1);
  }

  void run() { read_header(); }

  /// From the relay, on an actor thread: one event, encoded when the answer is a stream.
  void deliver(std::string line, std::optional<run_event> terminal) {
    net::post(stream_.get_executor(), [self = shared_from_this(), line = std::move(line),
                                       terminal = std::move(terminal)]() mutable {
      self->on_event(std::move(line), std::move(terminal));
    });
  }

private:
  enum class answer : uint8_t { plain, stream, collect };

  // ---- request cycle --------------------------------------------------------------------

  void read_header() {
    parser_.emplace();
    parser_->header_limit(16 * 1024);
    // Set after the header: a length over the cap is then refused after the token check.
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    stream_.expires_after(ctx_.opts.client_timeout);
    http::async_read_header(
        stream_, buf_, *parser_,
        [self = shared_from_this()](error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(error_code ec) {
    if (ec) return close();
    auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    auto method = sv(req.method_string());
    auto target = sv(req.target());
    auto r = match_route(method, target);
    if (!r) return refuse(r.error());
    route_ = std::move(*r);
    if (route_->kind == route::outcome::not_found) {
      auto what = std::string{method} + " " + std::string{target.substr(0, target.find('?'))};
      route_.reset();
      return refuse(fail(ec::not_found, "no endpoint " + what + " (see bridge/API.md)"));
    }
    if (route_->kind == route::outcome::method_not_allowed) {
      allow_ = route_->allow;
      auto f = fail(ec::bad_request, "method " + std::string{method} + " is not allowed on " +
                                         std::string{target} + "; use " + allow_);
      route_.reset();
      return refuse(f, 405);
    }
    if (route_->ep != endpoint::healthz && !ctx_.opts.token.empty() &&
        !authorized(sv(req[http::field::authorization]), ctx_.opts.token))
      return refuse(fail(ec::policy_refused, "missing or wrong bearer token "
                                             "(Authorization: Bearer <GUESTFLOW_TOKEN>)"),
                    401);
    auto limit = ctx_.opts.max_body_bytes;
    if (auto len = parser_->content_length(); len && *len > limit)
      return refuse(too_large(limit), 413);
    if (parser_->is_done()) return dispatch();
    parser_->body_limit(limit);
    auto read_body = [self = shared_from_this()] {
      self->stream_.expires_after(self->ctx_.opts.client_timeout);
      http::async_read(self->stream_, self->buf_, *self->parser_,
                       [self](error_code ec, size_t) { self->on_body(ec); });
    };
    if (!beast::iequals(req[http::field::expect], "100-continue")) return read_body();
    static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(ctx_.opts.client_timeout);
    net::async_write(stream_, net::buffer(continue_line.data(), continue_line.size()),
                     [self = shared_from_this(), read_body](error_code ec, size_t) {
                       if (ec) return self->close();
                       read_body();
                     });
  }

  void on_body(error_code ec) {
    if (ec == http::error::body_limit) return refuse(too_large(ctx_.opts.max_body_bytes), 413);
    if (ec) return close();
    dispatch();
  }

  static failure too_large(uint64_t limit) {
    return fail(ec::bad_request, "request body exceeds the limit of " + std::to_string(limit) +
                                     " bytes (GUESTFLOW_MAX_BODY_BYTES)");
  }

  void dispatch() {
    auto body = std::move(parser_->get().body());
    decode_limits limits;
    limits.max_bytes = ctx_.opts.max_body_bytes;
    auto& svc = ctx_.svc;
    switch (route_->ep) {
    case endpoint::healthz:
      return respond(200, R"({"status":"ok"})");
    case endpoint::capabilities:
      return respond(200, encode_capabilities(svc.config().provider.caps, svc.provider_name()));
    case endpoint::metrics:
      return svc.stats(hop<runtime_stats>([](connection& c, result<runtime_stats> r) {
        if (!r) return c.refuse(r.error());
        c.respond(200, c.ctx_.stats.render(*r, c.ctx_.opts.cp_latency),
                  "text/plain; version=0.0.4; charset=utf-8");
      }));
    case endpoint::sandbox_run: {
      auto call = decode<sandbox_call>(body, limits);
      if (!call) return refuse(call.error());
      return svc.sandbox_run(
          *call, hop<sandbox_result>([](connection& c, auto r) { c.answer_with(r); }));
    }
    case endpoint::component_run: {
      auto call = decode<component_call>(body, limits);
      if (!call) return refuse(call.error());
      return svc.component_run(
          *call, hop<component_answer>([](connection& c, auto r) { c.answer_with(r); }));
    }
    case endpoint::cancel_run: {
      auto id = route_->run_id;
      return svc.cancel(id, hop<bool>([id](connection& c, result<bool> r) {
                          if (!r) return c.refuse(r.error());
                          c.respond(200, encode_cancel_answer(id, *r));
                        }));
    }
    case endpoint::start_run: {
      auto req = decode<run_request>(body, limits);
      if (!req) return refuse(req.error());
      begin_run(req->stream ? answer::stream : answer::collect);
      return svc.start_run(std::move(*req), relay_,
                           hop<std::string>([](connection& c, result<std::string> id) {
                             c.on_admitted(std::move(id));
                           }));
    }
    case endpoint::run_events: {
      begin_run(answer::stream);
      auto id = route_->run_id;
      return svc.subscribe(id, route_->from_seq, relay_,
                           hop<uint64_t>([id](connection& c, result<uint64_t> r) {
                             if (!r) return c.on_admitted(r.error());
                             c.on_admitted(id);
                           }));
    }
    }
  }

  /// An answer of the service, hopped back onto this connection's strand.
  template<class T, class F>
  reply<T> hop(F f) {
    return [self = shared_from_this(), f](result<T> r) {
      net::post(self->stream_.get_executor(),
                [self, f, r = std::move(r)]() mutable { f(*self, std::move(r)); });
    };
  }

  template<class T>
  void answer_with(const result<T>& r) {
    if (!r) return refuse(r.error());
    respond(200, encode(*r));
  }

  // ---- plain answers --------------------------------------------------------------------

  void refuse(const failure& f, unsigned status = 0) {
    respond(status ? status : http_status(f.code), encode_error(f, run_id_));
  }

  void respond(unsigned status, std::string body,
               std::string_view content_type = "application/json") {
    if (route_) ctx_.stats.answered(route_->ep, status);
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(status), version_);
    res->set(http::field::server, "guestflow");
    res->set(http::field::content_type,
             beast::string_view{content_type.data(), content_type.size()});
    if (status == 401) res->set(http::field::www_authenticate, "Bearer");
    if (status == 405) res->set(http::field::allow, allow_);
    if (status == 429) res->set(http::field::retry_after, "1");
    // An answer before the body was read (401, 413) must close: the rest of the body
    // would be read as the next request.
    auto body_unread = parser_ && !parser_->is_done();
    res->keep_alive(keep_alive_ && mode_ == answer::plain && !body_unread);
    res->body() = std::move(body);
    res->prepare_payload();
    stream_.expires_after(ctx_.opts.client_timeout);
    http::async_write(stream_, *res, [self = shared_from_this(), res](error_code ec, size_t) {
      if (ec) return self->close();
      if (!res->keep_alive()) return self->linger_close();
      self->route_.reset();
      self->read_header();
    });
  }

  // ---- runs -----------------------------------------------------------------------------

  /// Spawns the relay and starts watching for the client to go away.
  void begin_run(answer mode) {
    mode_ = mode;
    relay_ = ctx_.svc.system().spawn(relay, weak_from_this(), mode == answer::stream);
    watch();
  }

  /// A read that only notices the client closing (a run's answer ends the connection, so
  /// anything else the client sends is discarded). Before the answer is out, that closing
  /// is a disconnect: close() stops the relay, which the run sees.
  void watch() {
    watching_ = true;
    stream_.socket().async_read_some(net::buffer(scratch_),
                                     [self = shared_from_this()](error_code ec, size_t) {
                                       if (!ec) return self->watch();
                                       self->watching_ = false;
                                       self->close();
                                     });
  }

  void on_admitted(result<std::string> id) {
    if (!id) {
      stop_relay();
      return refuse(id.error());
    }
    run_id_ = std::move(*id);
    if (mode_ == answer::collect) {
      if (terminal_) collect_done();
      return;
    }
    streaming_ = true;
    ctx_.stats.streams(+1);
    ctx_.stats.answered(route_->ep, 200);
    head_ = "HTTP/1.1 200 OK\r\nServer: guestflow\r\nContent-Type: application/x-ndjson\r\n"
            "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\nConnection: close\r\n"
            "X-Guestflow-Run-Id: " +
            run_id_ + "\r\n\r\n";
    pump();
    tick();
  }

  /// A blank line after a quiet heartbeat period (a vertex computing for minutes): it
  /// keeps proxies from timing the stream out and lets the client tell a quiet run from a
  /// dead server. NDJSON readers skip blank lines.
  void tick() {
    heartbeat_.expires_after(ctx_.opts.heartbeat);
    heartbeat_.async_wait([self = shared_from_this()](error_code ec) {
      if (ec || self->closed_ || self->finished_) return;
      if (!self->wrote_since_tick_ && !self->writing_ && self->lines_.empty()) {
        self->lines_.push_back("\n");
        self->pump();
      }
      self->wrote_since_tick_ = false;
      self->tick();
    });
  }

  void on_event(std::string line, std::optional<run_event> terminal) {
    if (closed_) return;
    if (mode_ == answer::collect) {
      if (terminal) {
        terminal_ = std::move(terminal);
        if (!run_id_.empty()) collect_done();
      }
      return;
    }
    if (terminal) {
      ctx_.stats.finished(*terminal);
      last_queued_ = true;
    }
    backlog_bytes_ += line.size();
    lines_.push_back(std::move(line));
    ++queued_events_;
    // Behind means events piling up behind a write the client has not taken for a while:
    // a burst (the last vertex and a large `complete` at once) behind a write that is
    // moving is not a slow client. A write stalled for the whole client timeout ends the
    // connection on its own.
    if (writing_ && backlog_bytes_ > ctx_.opts.stream_backlog_bytes &&
        std::chrono::steady_clock::now() - write_started_ > stall_grace) {
      ctx_.stats.dropped_slow_client();
      return close();
    }
    pump();
  }

  void collect_done() {
    auto& e = *terminal_;
    ctx_.stats.finished(e);
    if (e.type == run_event::kind::complete) return respond(200, encode_run_answer(run_id_, e));
    refuse(failure{e.code, e.message});
  }

  /// Writes what is queued as one chunk (the head first, the last chunk after the
  /// terminal event); one write at a time.
  void pump() {
    if (writing_ || closed_ || !streaming_ || (head_.empty() && lines_.empty())) return;
    out_ = std::move(head_);
    head_.clear();
    if (!lines_.empty()) {
      size_t n = 0;
      for (auto& l : lines_)
        n += l.size();
      out_ += chunk_size_line(n);
      for (auto& l : lines_)
        out_ += l;
      out_ += "\r\n";
      ctx_.stats.sent(queued_events_);
      queued_events_ = 0;
      lines_.clear();
      backlog_bytes_ = 0;
      if (last_queued_) {
        out_ += "0\r\n\r\n";
        finished_ = true;
      }
    }
    writing_ = true;
    write_started_ = std::chrono::steady_clock::now();
    wrote_since_tick_ = true;
    stream_.expires_after(ctx_.opts.client_timeout);
    net::async_write(stream_, net::buffer(out_),
                     [self = shared_from_this()](error_code ec, size_t) {
                       self->writing_ = false;
                       if (ec == beast::error::timeout) self->ctx_.stats.dropped_slow_client();
                       if (ec) return self->close();
                       if (self->finished_) return self->linger_close();
                       self->pump();
                     });
  }

  // ---- teardown -------------------------------------------------------------------------

  void stop_relay() {
    if (relay_) {
      caf::anon_send_exit(relay_, caf::exit_reason::user_shutdown);
      relay_ = nullptr;
    }
  }

  /// Ends a connection whose answer is written without losing it: closing with unread
  /// request bytes (an early 413) would reset the connection before the client reads the
  /// answer, so send FIN, read and discard until the client closes, then close — within
  /// the client timeout.
  void linger_close() {
    if (closed_) return;
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    linger_.expires_after(ctx_.opts.client_timeout);
    linger_.async_wait([self = shared_from_this()](error_code ec) {
      if (!ec) self->close();
    });
    if (!watching_) watch();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    linger_.cancel();
    heartbeat_.cancel();
    stop_relay();
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  server_context& ctx_;
  beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<route> route_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::string allow_;

  answer mode_ = answer::plain;
  run_subscriber_actor relay_;
  std::string run_id_;
  std::optional<run_event> terminal_; ///< collect: the terminal event
  std::string head_;                  ///< stream: the response head, until written
  std::deque<std::string> lines_;     ///< stream: encoded events not yet written
  size_t queued_events_ = 0;          ///< lines_ that are events (not heartbeats)
  bool wrote_since_tick_ = false;
  size_t backlog_bytes_ = 0;
  std::string out_; ///< the write in flight
  bool writing_ = false;
  std::chrono::steady_clock::time_point write_started_;
  bool streaming_ = false;
  bool last_queued_ = false; ///< the terminal event is in lines_ or out_
  bool finished_ = false;    ///< the last chunk is written (or being written)
  bool closed_ = false;
  bool watching_ = false;
  net::steady_timer linger_;
  net::steady_timer heartbeat_;
  std::array<char, 512> scratch_{};
};

run_subscriber_actor::behavior_type relay(run_subscriber_actor::pointer self,
                                          std::weak_ptr<connection> conn, bool lines) {
  return {[self, conn, lines](run_event& e) {
    auto c = conn.lock();
    if (!c) {
      self->quit(caf::exit_reason::user_shutdown);
      return;
    }
    auto terminal = e.terminal();
    std::string line;
    if (lines) {
      line = encode(e);
      line += '\n';
    }
    c->deliver(std::move(line),
               terminal ? std::optional<run_event>{std::move(e)} : std::nullopt);
    if (terminal) self->quit();
  }};
}

} // namespace

void serve_connection(tcp::socket socket, server_context& ctx) {
  std::make_shared<connection>(std::move(socket), ctx)->run();
}

} // namespace guestflow::bridge
