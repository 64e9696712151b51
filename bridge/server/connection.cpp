#include "bridge/server/connection.hpp"

#include "actors/line_relay.hpp"
#include "actors/run_relay.hpp"
#include "bridge/server/exchange.hpp"
#include "common/numbers.hpp"
#include "controlplane/client/tls.hpp"
#include "controlplane/client/url.hpp"
#include "controlplane/forward/http_forward.hpp"
#include "messages/bridge.hpp"
#include "messages/http_status.hpp"
#include "messages/type_ids.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <cerrno>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <sys/socket.h>
#include <type_traits>
#include <utility> // before the Asio headers (see CONTRIBUTING)

namespace guestflow::bridge {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

/// How long a write may be in flight before the events queued behind it count as a backlog.
constexpr auto stall_grace = std::chrono::seconds{1};

/// `n` as the hex size line of one HTTP chunk.
std::string chunk_size_line(size_t n) {
  char buf[24];
  auto len = std::snprintf(buf, sizeof buf, "%zx\r\n", n);
  return std::string(buf, static_cast<size_t>(len));
}

/// The prefix of a service URL's path (bridge/API.md, "Service URLs"): `{token}/{path…}`
/// follow it.
constexpr std::string_view port_url_prefix = "/v1/ports/";

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// serve's TLS contexts for https control planes, one per endpoint, made as the client's
/// transport makes its own (controlplane/client/tls.hpp) and kept: the system CA store is
/// read once, not per request.
result<std::shared_ptr<net::ssl::context>> tls_context_of(const cp::endpoint& ep,
                                                          const std::string& origin) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<net::ssl::context>> made;
  auto key = ep.base_url + (ep.verify_tls ? "\n1\n" : "\n0\n") + ep.ca_pem;
  std::lock_guard lock{mu};
  if (auto i = made.find(key); i != made.end()) return i->second;
  auto ctx = cp::tls_client_context(ep, origin);
  if (!ctx) return ctx.error();
  auto held = std::make_shared<net::ssl::context>(std::move(*ctx));
  made.emplace(std::move(key), held);
  return held;
}

/// What a relay hands a connection: a run's event (its line, and the event itself when it is
/// the terminal one) or a line-streamed answer's line.
struct delivery {
  std::string line;
  std::optional<run_event> terminal;
  bool is_line = false;
  bool last = false; ///< is_line: the answer ends after it
};

/// One HTTP connection: the transport only. Requests are read one at a time and handed to
/// the route table's handler (bridge/server/surfaces/), which answers through the exchange
/// interface. While a run goes on, a socket read watches for the client going away; a
/// streamed answer ends the connection (`Connection: close`), a collected one keeps it
/// alive as a plain answer does (callers pool their connections) unless the client sent
/// bytes during the run (the watch discarded them: the connection closes after the answer).
/// The run's relay (actors/run_relay.hpp) delivers its events here as a run_event_sink; a
/// line-streamed answer's relay (actors/line_relay.hpp) its lines as a line_sink.
class connection final : public exchange, public run_event_sink, public line_sink {
public:
  connection(tcp::socket socket, server_context& ctx)
      : stream_(std::move(socket))
      , ctx_(ctx)
      , linger_(stream_.get_executor())
      , heartbeat_(stream_.get_executor())
      , request_timer_(stream_.get_executor()) {}

  ~connection() {
    stop_relay();
    settle();
    if (streaming_) ctx_.stats.streams(-1);
  }

  void run() { read_header(); }

  // ---- run_event_sink -------------------------------------------------------------------

  /// From the relay, on an actor thread: one event, encoded when the answer is a stream.
  void deliver(std::string line, std::optional<run_event> terminal) override {
    enqueue({std::move(line), std::move(terminal), false, false});
  }

  // ---- line_sink ------------------------------------------------------------------------

  /// From the line relay, on an actor thread: the answer's head may go out.
  void open_lines() override {
    net::post(stream_.get_executor(), [self = shared()] { self->on_open_lines(); });
  }

  /// From the line relay, on an actor thread: one line.
  void deliver_line(std::string line, bool last) override {
    if (last && before_last_) before_last_(); // set before the relay exists: no race
    enqueue({std::move(line), std::nullopt, true, last});
  }

  // ---- exchange -------------------------------------------------------------------------

  const route_params& params() const override { return params_; }

  std::string take_body() override { return std::move(reader_.parser().get().body()); }

  std::string header(std::string_view name) const override {
    if (!reader_.has_parser()) return {};
    auto v = reader_.parser().get()[beast::string_view{name.data(), name.size()}];
    return std::string{v.data(), v.size()};
  }

  decode_limits body_limits() const override {
    decode_limits limits;
    limits.max_bytes = body_cap(route_, ctx_.opts);
    return limits;
  }

  void respond(unsigned status, std::string body,
               std::string_view content_type = "application/json") override {
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
    auto body_unread = reader_.has_parser() && !reader_.parser().is_done();
    auto reusable = mode_ == answer::plain || (mode_ == answer::collect && !discarded_);
    res->keep_alive(keep_alive_ && reusable && !body_unread && !ctx_.stopping);
    res->body() = std::move(body);
    res->prepare_payload();
    answered_ = true;
    stream_.expires_after(ctx_.opts.client_timeout);
    http::async_write(stream_, *res, [self = shared(), res](error_code ec, size_t) {
      self->settle();
      if (ec) return self->close();
      if (!res->keep_alive()) return self->linger_close();
      self->next_request();
    });
  }

  void refuse(const failure& f) override { refuse(f, 0); }

  /// Spawns the relay and starts watching for the client to go away.
  run_subscriber_actor begin_run(run_answer mode) override {
    mode_ = mode == run_answer::stream ? answer::stream : answer::collect;
    owe();
    std::weak_ptr<run_event_sink> sink = shared();
    relay_ = ctx_.svc.system().spawn(run_relay, std::move(sink), mode == run_answer::stream);
    watch();
    return relay_;
  }

  void admitted(result<std::string> id) override {
    if (!id) {
      stop_relay();
      return refuse(id.error());
    }
    run_id_ = std::move(*id);
    if (mode_ == answer::collect) {
      if (terminal_) collect_done();
      return;
    }
    start_stream("X-Guestflow-Run-Id: " + run_id_ + "\r\n");
  }

  /// Spawns the line relay and starts watching for the client to go away.
  line_relay_actor begin_lines(std::function<void()> before_last) override {
    mode_ = answer::stream;
    before_last_ = std::move(before_last);
    owe();
    std::weak_ptr<line_sink> sink = shared();
    line_relay_ = ctx_.svc.system().spawn(line_relay, std::move(sink));
    watch();
    return line_relay_;
  }

  void lines_failed(const failure& f) override {
    if (streaming_ || answered_ || closed_) return;
    stop_relay();
    refuse(f);
  }

  void on_disconnect(std::function<void()> gone) override {
    if (closed_) return gone();
    mode_ = answer::collect; // the watch reads the socket: the answer ends the connection
    gone_ = std::move(gone);
    owe();
    if (!watching_) watch();
  }

private:
  enum class answer : uint8_t { plain, stream, collect };

  std::shared_ptr<connection> shared() {
    return std::static_pointer_cast<connection>(shared_from_this());
  }

  void post(std::function<void(exchange&)> f) override {
    net::post(stream_.get_executor(), [self = shared(), f = std::move(f)] { f(*self); });
  }

  // ---- request cycle --------------------------------------------------------------------

  /// After a kept-alive answer: a collected run's watch is cancelled first (its handler
  /// then reads the next request), and what the run left (its relay, its cancel) goes.
  void next_request() {
    route_ = nullptr;
    if (mode_ != answer::plain) {
      stop_relay();
      mode_ = answer::plain;
      run_id_.clear();
      terminal_.reset();
      gone_ = nullptr;
    }
    if (!watching_) return read_header();
    rearm_ = true;
    error_code ignored;
    stream_.socket().cancel(ignored);
  }

  void read_header() {
    if (ctx_.stopping) return close(); // a keep-alive connection between requests
    answered_ = false;
    arm_request_timer();
    reader_.read_header([self = shared()](error_code ec) { self->on_header(ec); });
  }

  /// The request must arrive within the client timeout. Not the stream's own timeout: that
  /// closes the socket, and a client whose request stopped half-way is owed a 408 first.
  void arm_request_timer() {
    timed_out_ = false;
    stream_.expires_never();
    request_timer_.expires_after(ctx_.opts.client_timeout);
    request_timer_.async_wait([self = shared()](error_code ec) {
      if (ec || self->closed_) return;
      self->timed_out_ = true;
      error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }

  void on_header(error_code ec) {
    request_timer_.cancel();
    if (ec) return malformed(ec);
    auto& req = reader_.parser().get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    if (auto t = reader_.sv(req.target());
        t.substr(0, port_url_prefix.size()) == port_url_prefix)
      return forward_port(t.substr(port_url_prefix.size()));
    auto v = reader_.judge(ctx_.routes, ctx_.opts);
    if (v.close) keep_alive_ = false;
    allow_ = std::move(v.allow);
    route_ = v.target;
    params_ = std::move(v.params);
    if (v.then == header_verdict::next::refuse) return refuse(v.refusal, v.status);
    if (route_->slots != slot_use::none)
      if (auto no = ctx_.svc.refusal_before_reading(route_->slots == slot_use::or_queue))
        return refuse(*no);
    if (v.then == header_verdict::next::dispatch) return dispatch();
    auto read_body = [self = shared(), cap = v.cap] {
      self->arm_request_timer();
      self->reader_.read_body(cap, [self](error_code ec) { self->on_body(ec); });
    };
    if (!beast::iequals(req[http::field::expect], "100-continue")) return read_body();
    static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
    stream_.expires_after(ctx_.opts.client_timeout);
    net::async_write(stream_, net::buffer(continue_line.data(), continue_line.size()),
                     [self = shared(), read_body](error_code ec, size_t) {
                       if (ec) return self->close();
                       read_body();
                     });
  }

  void on_body(error_code ec) {
    request_timer_.cancel();
    if (ec == http::error::body_limit) return refuse(reader_.too_large(route_, ctx_.opts), 413);
    if (ec) return malformed(ec);
    dispatch();
  }

  /// A request that could not be read: answered before the close (400, 408 for one that
  /// stopped arriving, 431 for a header over its cap), so the client learns why. A client
  /// that went away, or one idle between requests, is only closed.
  void malformed(error_code ec) {
    auto started = reader_.started();
    if (ec == http::error::header_limit)
      return refuse(fail(ec::bad_request, "request header exceeds the limit of " +
                                              std::to_string(max_header_bytes) + " bytes"),
                    431);
    if (timed_out_ || ec == beast::error::timeout) {
      if (!started) return close();
      return refuse(fail(ec::bad_request, "request not received within " +
                                              std::to_string(ctx_.opts.client_timeout.count()) +
                                              " s (GUESTFLOW_CLIENT_TIMEOUT_SECONDS)"),
                    408);
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof ||
        ec == net::error::connection_reset || ec == net::error::broken_pipe ||
        ec == net::error::operation_aborted || ec == http::error::partial_message)
      return close();
    refuse(fail(ec::bad_request, "malformed HTTP request: " + ec.message()), 400);
  }

  /// Hands the request to its route's handler, which answers through this exchange.
  void dispatch() { route_->handler(*this, ctx_); }

  // ---- service URLs ---------------------------------------------------------------------

  /// A service URL's request (`rest`: `{token}/{path…}`): not a route of the table — its
  /// path is open-ended, its body streams through unread, and its token stands for the
  /// bearer token (a browser that follows the URL has no header to add). The token is
  /// checked, the control plane holding the guest found (a fleet's node), and the request
  /// forwarded there (controlplane/forward) with that control plane's key.
  void forward_port(std::string_view rest) {
    keep_alive_ = false; // refusals below come before the body: nothing may follow them
    if (auto framing = check_framing(reader_.parser().get()); framing.status)
      return refuse(fail(ec::bad_request, "malformed HTTP request: " + framing.reason),
                    framing.status);
    auto end = rest.find_first_of("/?");
    auto grant = ctx_.ports.verify(rest.substr(0, end), unix_now());
    if (!grant) return refuse(grant.error(), 401);
    auto path =
        end == std::string_view::npos ? std::string{"/"} : std::string{rest.substr(end)};
    if (path[0] == '?') path.insert(0, "/");
    auto target =
        "/v1/sandboxes/" + grant->guest_id + "/ports/" + std::to_string(grant->port) + path;
    ctx_.svc.endpoint_of(grant->guest_id, [self = shared(), target = std::move(target)](
                                              result<cp::endpoint> where) mutable {
      net::post(self->stream_.get_executor(),
                [self, target = std::move(target), where = std::move(where)]() mutable {
                  self->connect_upstream(std::move(target), std::move(where));
                });
    });
  }

  /// Connects to the control plane `where` names: a Unix socket, TCP to an address or a
  /// resolved name, and for https a TLS handshake verified as the client verifies its own
  /// (controlplane/client/tls.hpp). All of it within the client timeout.
  void connect_upstream(std::string target, result<cp::endpoint> where) {
    if (closed_) return;
    if (!where) return refuse(where.error());
    auto url = cp::parse_base_url(where->base_url);
    if (!url)
      return refuse(
          fail(ec::unavailable, "control plane URL " + where->base_url +
                                    " cannot be forwarded to: " + url.error().message));
    std::shared_ptr<net::ssl::context> tls;
    if (url->tls) {
      auto made = tls_context_of(*where, url->origin());
      if (!made) return refuse(made.error());
      tls = std::move(*made);
    }
    up_ = upstream_hop{std::move(*where), std::move(*url), std::move(target), std::move(tls)};
    if (reuse_kept()) return;
    upstream_.emplace(stream_.get_executor());
    request_timer_.expires_after(ctx_.opts.client_timeout);
    request_timer_.async_wait([self = shared()](error_code ec) {
      if (ec) return;
      error_code ignored; // the step in flight fails with operation_aborted
      if (self->resolver_) self->resolver_->cancel();
      if (self->upstream_) self->upstream_->close(ignored);
      if (self->tls_upstream_) beast::get_lowest_layer(*self->tls_upstream_).close(ignored);
    });
    if (!up_->url.socket_path.empty())
      return connect_to({net::generic::stream_protocol::endpoint{
          net::local::stream_protocol::endpoint{up_->url.socket_path}}});
    error_code bad;
    auto addr = net::ip::make_address(up_->url.host, bad);
    if (!bad)
      return connect_to(
          {net::generic::stream_protocol::endpoint{tcp::endpoint{addr, up_->url.port}}});
    resolver_.emplace(stream_.get_executor());
    resolver_->async_resolve(
        up_->url.host, std::to_string(up_->url.port),
        [self = shared()](error_code ec, tcp::resolver::results_type found) {
          self->resolver_.reset();
          if (self->closed_) {
            self->request_timer_.cancel();
            return;
          }
          if (ec) return self->upstream_unreachable("resolving it", ec);
          std::vector<net::generic::stream_protocol::endpoint> to;
          for (const auto& e : found)
            to.emplace_back(e.endpoint());
          self->connect_to(std::move(to));
        });
  }

  /// Connects to the first of `to` that answers.
  void connect_to(std::vector<net::generic::stream_protocol::endpoint> to, size_t i = 0) {
    upstream_->async_connect(to[i], [self = shared(), to, i](error_code ec) mutable {
      if (self->closed_) {
        self->request_timer_.cancel();
        return;
      }
      if (ec && ec != net::error::operation_aborted && i + 1 < to.size()) {
        error_code ignored;
        self->upstream_->close(ignored);
        return self->connect_to(std::move(to), i + 1);
      }
      if (ec) return self->upstream_unreachable("connecting", ec);
      if (!self->up_->tls) {
        self->request_timer_.cancel();
        return self->start_forward(std::exchange(self->upstream_, std::nullopt).value());
      }
      self->handshake();
    });
  }

  void handshake() {
    tls_upstream_.emplace(std::move(*upstream_), *up_->tls);
    upstream_.reset();
    cp::set_tls_peer(tls_upstream_->native_handle(), up_->url.host, up_->where.verify_tls);
    tls_upstream_->async_handshake(
        net::ssl::stream_base::client, [self = shared()](error_code ec) {
          self->request_timer_.cancel();
          if (self->closed_) return;
          if (ec) {
            error_code ignored;
            beast::get_lowest_layer(*self->tls_upstream_).close(ignored);
            self->tls_upstream_.reset();
            return self->refuse(
                fail(ec::unavailable, "the TLS handshake with the guest's control plane "
                                      "failed, nothing was forwarded: " +
                                          ec.message()));
          }
          self->start_forward(std::exchange(self->tls_upstream_, std::nullopt).value());
        });
  }

  /// Forwards over the connection the last service-URL request of this client connection
  /// left open, when it goes to the same control plane and is still open: no connect, no
  /// TLS handshake. False (and it is dropped) otherwise.
  bool reuse_kept() {
    bool same = kept_.base_url == up_->where.base_url;
    // Open and silent: a close (or a close_notify) shows as readable.
    auto silent = [](int fd) {
      char c;
      auto n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    };
    if (same && kept_.plain && silent(kept_.plain->native_handle())) {
      auto kept = std::move(*kept_.plain);
      drop_kept();
      start_forward(std::move(kept));
      return true;
    }
    if (same && kept_.tls && silent(beast::get_lowest_layer(*kept_.tls).native_handle())) {
      forward::tls_upstream kept{std::move(*kept_.tls)};
      drop_kept();
      start_forward(std::move(kept));
      return true;
    }
    drop_kept();
    return false;
  }

  void drop_kept() {
    kept_.base_url.clear();
    kept_.plain.reset();
    kept_.tls.reset();
  }

  void upstream_unreachable(const char* during, error_code ec) {
    request_timer_.cancel();
    upstream_.reset();
    refuse(
        fail(ec::unavailable, std::string{"control plane unreachable for the service URL ("} +
                                  during + "): " + ec.message()));
  }

  template<class Upstream>
  void start_forward(Upstream upstream) {
    auto& req = reader_.parser().get();
    auto hop = std::move(*up_);
    up_.reset();
    const auto& key = hop.where.api_key;
    // The control plane's key goes up instead of anything the client sent in its place;
    // serve's own bearer token never reaches the guest.
    req.erase("X-Api-Key");
    req.erase("X-Guestflow-Ingress-Token");
    if (!ctx_.opts.token.empty() &&
        same_secret(reader_.sv(req[http::field::authorization]), "Bearer " + ctx_.opts.token))
      req.erase(http::field::authorization);
    if (!key.empty()) req.set("X-Api-Key", key);
    forward::basic_forward_options<Upstream> o;
    o.target = hop.url.prefix + hop.target;
    o.max_body_bytes = ctx_.opts.max_body_bytes;
    // Kept for this client connection's next service-URL request (reuse_kept).
    o.keep_upstream = [self = shared(), base = hop.where.base_url](Upstream kept) {
      self->kept_.base_url = base;
      if constexpr (std::is_same_v<Upstream, forward::tls_upstream>)
        self->kept_.tls.emplace(std::move(kept));
      else
        self->kept_.plain.emplace(std::move(kept));
    };
    http::request_parser<http::empty_body> head{std::move(reader_.parser())};
    forward::forward_exchange(
        stream_, reader_.buffer(), std::move(head), std::move(upstream), std::move(o),
        [self = shared()](forward::forward_outcome r) { self->forwarded(std::move(r)); });
  }

  void forwarded(forward::forward_outcome r) {
    using kind = forward::forward_outcome::kind;
    if (r.answered) {
      if (r.what == kind::done && r.keep_alive && !closed_) {
        keep_alive_ = true;
        return read_header();
      }
      // Answered before the request's body ended: drained, then closed (not reset).
      if (r.body_unread) return linger_close();
      return close();
    }
    if (r.what == kind::body_too_large)
      return refuse(fail(ec::bad_request, "request body exceeds the limit of " +
                                              std::to_string(ctx_.opts.max_body_bytes) +
                                              " bytes of GUESTFLOW_MAX_BODY_BYTES"),
                    413);
    if (r.what == kind::upstream_failed)
      return refuse(fail(ec::unavailable, "the guest's control plane failed the service URL "
                                          "request: " +
                                              r.error),
                    502);
    close();
  }

  // ---- plain answers --------------------------------------------------------------------

  /// The error answer for `f`; `status` overrides the table for the transport's own
  /// refusals (401, 405, 413).
  void refuse(const failure& f, unsigned status) {
    respond(status ? status : http_status(f.code), encode_error(f, run_id_));
  }

  // ---- runs -----------------------------------------------------------------------------

  /// A read that only notices the client closing (a run's answer ends the connection, so
  /// anything else the client sends is discarded). Before the answer is out, that closing
  /// is a disconnect: close() stops the relay, which the run sees.
  void watch() {
    watching_ = true;
    stream_.socket().async_read_some(
        net::buffer(scratch_), [self = shared()](error_code ec, size_t n) {
          if (n > 0) self->discarded_ = true;
          if (!ec && !self->rearm_) return self->watch();
          self->watching_ = false;
          // Cancelled by next_request, nothing read: the connection goes on.
          if (std::exchange(self->rearm_, false) && ec == net::error::operation_aborted &&
              !self->discarded_ && !self->closed_)
            return self->read_header();
          self->close();
        });
  }

  /// A blank line after a quiet heartbeat period (a vertex computing for minutes): it
  /// keeps proxies from timing the stream out and lets the client tell a quiet run from a
  /// dead server. NDJSON readers skip blank lines.
  void tick() {
    heartbeat_.expires_after(ctx_.opts.heartbeat);
    heartbeat_.async_wait([self = shared()](error_code ec) {
      if (ec || self->closed_ || self->finished_) return;
      if (!self->wrote_since_tick_ && !self->writing_ && self->lines_.empty()) {
        self->lines_.push_back("\n");
        self->pump();
      }
      self->wrote_since_tick_ = false;
      self->tick();
    });
  }

  /// The 200 head of a streamed answer (`headers`: its own extra header lines), then
  /// whatever is queued, and the heartbeat.
  void start_stream(const std::string& headers) {
    streaming_ = true;
    ctx_.stats.streams(+1);
    ctx_.stats.answered(route_->ep, 200);
    head_ = "HTTP/1.1 200 OK\r\nServer: guestflow\r\nContent-Type: application/x-ndjson\r\n"
            "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\nConnection: close\r\n" +
            headers + "\r\n";
    pump();
    tick();
  }

  void on_open_lines() {
    if (closed_ || answered_ || streaming_ || mode_ != answer::stream) return;
    start_stream({});
  }

  void on_line(std::string line, bool last) {
    if (closed_ || answered_ || mode_ != answer::stream) return;
    if (!streaming_) start_stream({});
    line += '\n';
    queue_line(std::move(line), last);
  }

  /// From a relay's thread: events or lines that arrive while a drain is pending join it,
  /// so a burst (a flow's vertices, a command's output) is one hand-off to this
  /// connection's thread and one write, not one each.
  void enqueue(delivery d) {
    {
      std::lock_guard<std::mutex> guard{inbox_mu_};
      inbox_.push_back(std::move(d));
      if (inbox_.size() > 1) return; // the drain posted for the first one takes it too
    }
    net::post(stream_.get_executor(), [self = shared()] { self->drain_inbox(); });
  }

  void drain_inbox() {
    std::vector<delivery> batch;
    {
      std::lock_guard<std::mutex> guard{inbox_mu_};
      batch.swap(inbox_);
    }
    holding_ = true; // queue the whole batch, then write it at once
    for (auto& d : batch)
      if (d.is_line)
        on_line(std::move(d.line), d.last);
      else
        on_event(std::move(d.line), std::move(d.terminal));
    holding_ = false;
    pump();
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
    if (terminal) ctx_.stats.finished(*terminal);
    queue_line(std::move(line), terminal.has_value());
  }

  /// Queues one line of a streamed answer (`last`: the answer ends after it) and writes.
  void queue_line(std::string line, bool last) {
    if (last) last_queued_ = true;
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
    if (holding_ || writing_ || closed_ || !streaming_ || (head_.empty() && lines_.empty()))
      return;
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
    net::async_write(stream_, net::buffer(out_), [self = shared()](error_code ec, size_t) {
      self->writing_ = false;
      if (ec == beast::error::timeout) self->ctx_.stats.dropped_slow_client();
      if (ec) return self->close();
      if (self->finished_) {
        self->settle();
        return self->linger_close();
      }
      self->pump();
    });
  }

  // ---- shutdown accounting --------------------------------------------------------------

  /// This connection owes a run's answer (server::answers_owed) until settle().
  void owe() {
    if (owing_) return;
    owing_ = true;
    ctx_.answers_owed.fetch_add(1);
  }
  void settle() {
    if (!owing_) return;
    owing_ = false;
    ctx_.answers_owed.fetch_sub(1);
  }

  // ---- teardown -------------------------------------------------------------------------

  void stop_relay() {
    if (relay_) {
      caf::anon_send_exit(relay_, caf::exit_reason::user_shutdown);
      relay_ = nullptr;
    }
    if (line_relay_) {
      caf::anon_send_exit(line_relay_, caf::exit_reason::user_shutdown);
      line_relay_ = nullptr;
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
    linger_.async_wait([self = shared()](error_code ec) {
      if (!ec) self->close();
    });
    if (!watching_) watch();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    // A caller gone before its answer: the run is not wanted any more.
    if (gone_ && !answered_) std::exchange(gone_, {})();
    settle();
    linger_.cancel();
    heartbeat_.cancel();
    request_timer_.cancel();
    stop_relay();
    drop_kept(); // a kept service-URL connection closes with its client's
    error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  server_context& ctx_;
  request_reader<beast::tcp_stream> reader_{stream_}; ///< its buffer, the request's parser
  const route* route_ = nullptr; ///< the matched route, until its answer is written
  route_params params_;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  std::string allow_;

  answer mode_ = answer::plain;
  run_subscriber_actor relay_;
  line_relay_actor line_relay_; ///< a line-streamed answer's relay
  std::string run_id_;
  std::optional<run_event> terminal_; ///< collect: the terminal event
  std::string head_;                  ///< stream: the response head, until written
  std::deque<std::string> lines_;     ///< stream: encoded events not yet written
  std::mutex inbox_mu_;
  std::vector<delivery> inbox_; ///< from the relay's thread, until drain_inbox takes them
  bool holding_ = false;        ///< drain_inbox is queueing a batch: pump after it
  size_t queued_events_ = 0;    ///< lines_ that are events (not heartbeats)
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
  bool rearm_ = false;         ///< next_request cancelled the watch: its handler reads on
  bool discarded_ = false;     ///< the watch read (and dropped) bytes: no keep-alive after
  bool answered_ = false;      ///< a plain answer is being (or was) written
  bool owing_ = false;         ///< counted in answers_owed
  std::function<void()> gone_; ///< on_disconnect: cancels the run
  std::function<void()> before_last_; ///< begin_lines: runs before the last line goes out
  /// A service URL's control plane while it is being connected to.
  struct upstream_hop {
    cp::endpoint where;
    cp::base_url url;
    std::string target;                     ///< the path on it (below the URL's prefix)
    std::shared_ptr<net::ssl::context> tls; ///< https
  };
  std::optional<upstream_hop> up_;
  /// The control-plane connection the last service-URL request left open (reuse_kept).
  struct kept_upstream {
    std::string base_url;
    std::optional<net::generic::stream_protocol::socket> plain;
    std::optional<forward::tls_upstream> tls;
  };
  kept_upstream kept_;
  std::optional<tcp::resolver> resolver_;
  std::optional<net::generic::stream_protocol::socket> upstream_; ///< connecting
  std::optional<forward::tls_upstream> tls_upstream_;             ///< in its handshake
  net::steady_timer linger_;
  net::steady_timer heartbeat_;
  net::steady_timer request_timer_; ///< the request (header, then body) must arrive in time
  bool timed_out_ = false;          ///< request_timer_ cancelled the read
  std::array<char, 512> scratch_{};
};

} // namespace

void serve_connection(tcp::socket socket, server_context& ctx) {
  std::make_shared<connection>(std::move(socket), ctx)->run();
}

} // namespace guestflow::bridge
