#include "controlplane/client/http_call.hpp"

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <cerrno>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

namespace guestflow::cp {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using std::chrono::milliseconds;

namespace {

/// Bodies of non-2xx answers are envelopes; more than this is not worth reading.
constexpr size_t error_body_cap = size_t{1} << 20;
constexpr uint32_t header_cap = 64 * 1024;

bool ok_status(unsigned s) {
  return s >= 200 && s < 300;
}

/// A call whose outcome goes to a plain completion function.
class fn_call final : public http_call {
public:
  fn_call(std::shared_ptr<transport> t, call_spec spec, completion done, body_sink sink)
      : http_call(std::move(t), std::move(spec), std::move(sink))
      , done_(std::move(done)) {}

private:
  void deliver(result<std::string> r) override {
    auto done = std::move(done_);
    done(std::move(r));
  }
  completion done_;
};

} // namespace

std::string call_spec::what() const {
  std::string_view path(target);
  path.remove_prefix(std::min(path_at, path.size()));
  path = path.substr(0, path.find('?'));
  auto verb = http::to_string(method);
  std::string out;
  out.reserve(verb.size() + 1 + path.size());
  out.append(verb.data(), verb.size()).append(" ").append(path);
  return out;
}

std::shared_ptr<http_call> http_call::start(std::shared_ptr<transport> t, call_spec spec,
                                            completion done, body_sink sink) {
  return launch<fn_call>(std::move(t), std::move(spec), std::move(done), std::move(sink));
}

void http_call::run(const std::shared_ptr<http_call>& c) {
  c->enrolled_ = true;
  if (!c->t_->enroll(c, *c->lane_)) {
    c->enrolled_ = false;
    c->finish(fail(ec::unavailable,
                   "control-plane client for " + c->t_->url().origin() + " is shut down"));
  }
}

std::string request_head(const call_spec& spec, std::string_view host, std::string_view accept,
                         std::string_view api_key) {
  // The head Beast's serializer would write for a request with these fields, in this
  // order; Content-Length as Beast's prepare_payload decides it.
  auto verb = http::to_string(spec.method);
  bool with_length = !spec.body.empty() || spec.method == http::verb::post ||
                     spec.method == http::verb::put || spec.method == http::verb::options;
  auto length = with_length ? std::to_string(spec.body.size()) : std::string{};
  std::string head;
  head.reserve(verb.size() + spec.target.size() + host.size() + accept.size() + api_key.size() +
               spec.content_type.size() + length.size() + 128);
  head.append(verb.data(), verb.size()).append(" ").append(spec.target);
  head.append(" HTTP/1.1\r\nHost: ").append(host);
  head.append("\r\nUser-Agent: guestflow/0.1\r\nAccept: ").append(accept).append("\r\n");
  if (!api_key.empty()) head.append("X-Api-Key: ").append(api_key).append("\r\n");
  if (!spec.content_type.empty())
    head.append("Content-Type: ").append(spec.content_type).append("\r\n");
  if (with_length) head.append("Content-Length: ").append(length).append("\r\n");
  head.append("\r\n");
  return head;
}

http_call::http_call(std::shared_ptr<transport> t, call_spec spec, body_sink sink)
    : t_(std::move(t))
    , lane_(&t_->pick())
    , spec_(std::move(spec))
    , sink_(std::move(sink))
    , deadline_timer_(lane_->ioc)
    , retry_(t_->cfg().retry_initial, t_->cfg().retry_max) {
  if (spec_.timeout.count() <= 0) spec_.timeout = t_->cfg().default_timeout;
  if (spec_.content_type.empty()) spec_.body = {};
  std::string_view accept = spec_.kind == body_kind::raw && !sink_ ? "*/*" : "application/json";
  head_ = request_head(spec_, t_->url().host_header, accept, t_->ep().api_key);
}

void http_call::abort(failure why) {
  // A weak reference: a queued abort must not keep the call (and through it the transport
  // that owns the io_context holding the queue) alive.
  net::post(lane_->ioc, [weak = weak_from_this(), why = std::move(why)]() mutable {
    if (auto self = weak.lock(); self && !self->finished_) self->interrupt(std::move(why));
  });
}

void http_call::begin() {
  deadline_ = clock::now() + spec_.timeout;
  deadline_timer_.expires_at(deadline_);
  deadline_timer_.async_wait([self = shared_from_this()](error_code err) {
    if (!err && !self->finished_) self->on_deadline();
  });
  attempt();
}

void http_call::on_deadline() {
  // While a connection is in use, the deadline is that step timing out (what a stream
  // timeout on the step reported). Until an attempt reaches the server (backoff, resolve),
  // the previous attempt's failure explains more than "timed out": a control plane that
  // refused every connection until the deadline is unreachable (unavailable), not slow.
  // A connect cut short by the deadline after earlier attempts were refused says the same.
  bool retrying_refused = phase_ == phase::connect && !reached_server_ && last_failure_;
  if (conn_ && phase_ != phase::resolve && !retrying_refused) {
    auto o =
        map_transport(phase_, boost::beast::error::timeout, t_->url().origin(), spec_.what());
    return interrupt(std::move(o.value).error());
  }
  interrupt(!reached_server_ && last_failure_ ? *last_failure_
                                              : deadline_failure(spec_.what(), spec_.timeout));
}

void http_call::interrupt(failure why) {
  if (!aborted_) aborted_ = std::make_unique<failure>(std::move(why));
  if (resolver_) resolver_->cancel();
  if (backoff_timer_) backoff_timer_->cancel();
  if (conn_) conn_->close(); // its pending operations complete with operation_aborted
}

bool http_call::stop_if_aborted() {
  if (finished_) return true;
  if (!aborted_) return false;
  finish(*aborted_);
  return true;
}

void http_call::attempt() {
  reached_server_ = false;
  if (stop_if_aborted()) return;
  ++gen_;
  parser_.reset();
  conn_ = skip_pool_ ? nullptr : lane_->pool->acquire();
  skip_pool_ = false;
  reused_ = conn_ != nullptr;
  if (reused_) {
    waiting_for_connection_ = false;
    return send();
  }
  if (!t_->url().socket_path.empty())
    return connect_one(net::local::stream_protocol::endpoint{t_->url().socket_path});
  // An IP literal (the local control plane's 127.0.0.1) needs no lookup: the resolver
  // would hop to its own thread and back for every new connection.
  error_code not_literal;
  auto addr = net::ip::make_address(t_->url().host, not_literal);
  if (!not_literal) {
    tcp::endpoint ep{addr, t_->url().port};
    if (!t_->url().tls && !is_loopback_address(addr))
      return connect_to({ep}); // refused there, with its message
    return connect_one(ep);
  }
  phase_ = phase::resolve;
  if (!resolver_) resolver_ = std::make_unique<resolver>(lane_->ioc);
  resolver_->async_resolve(
      t_->url().host, std::to_string(t_->url().port),
      [self = shared_from_this()](error_code err, tcp::resolver::results_type r) {
        self->on_resolve(err, r);
      });
}

void http_call::on_resolve(const error_code& err, const tcp::resolver::results_type& r) {
  if (stop_if_aborted()) return;
  if (err)
    return attempt_failed(map_transport(phase::resolve, err, t_->url().origin(), spec_.what()));
  std::vector<tcp::endpoint> eps;
  for (const auto& e : r)
    eps.push_back(e.endpoint());
  connect_to(std::move(eps));
}

void http_call::connect_to(std::vector<tcp::endpoint> eps) {
  if (!t_->url().tls)
    eps.erase(std::remove_if(
                  eps.begin(), eps.end(),
                  [](const tcp::endpoint& e) { return !is_loopback_address(e.address()); }),
              eps.end());
  if (eps.empty())
    return finish(fail(ec::policy_refused, "control plane host " + t_->url().host +
                                               " does not resolve to a loopback address; "
                                               "plain http is only allowed to loopback"));
  conn_ = t_->open_connection(*lane_);
  phase_ = phase::connect;
  net::async_connect(
      conn_->sock(), eps,
      [self = shared_from_this()](error_code e, const auto&) { self->on_connect(e); });
}

/// One endpoint (an IP literal or a Unix socket), the socket opened here: non-blocking
/// from the start, so that neither connect nor the reads after readiness waits need
/// another mode switch.
void http_call::connect_one(const net::generic::stream_protocol::endpoint& ep) {
  conn_ = t_->open_connection(*lane_);
  phase_ = phase::connect;
  error_code err;
  conn_->sock().open(ep.protocol(), err);
  if (!err) conn_->sock().non_blocking(true, err);
  if (err == net::error::no_descriptors ||
      err == boost::system::errc::too_many_files_open_in_system) {
    // Out of descriptors (this process's or the system's): nothing was sent, and the calls
    // in flight hold the connections it lacks, so it waits for one of them, as for a full
    // accept queue, instead of failing a run a moment's wait would have carried.
    auto why = spec_.what() + ": no descriptor left for a connection to the control plane at " +
               t_->url().origin() + " (" + err.message() + ")";
    return wait_for_connection(fail(ec::transient, std::move(why)));
  }
  if (err)
    return attempt_failed(map_transport(phase::connect, err, t_->url().origin(), spec_.what()));
  if (!t_->url().socket_path.empty()) return connect_unix(ep);
  conn_->sock().async_connect(
      ep, [self = shared_from_this()](error_code e) { self->on_connect(e); });
}

/// A Unix connect completes at once or fails at once: EAGAIN is the server's accept queue
/// being full (a burst of new connections), which is "busy", not "down". Asio's
/// asynchronous connect would wait for writability and then take the unconnected socket
/// for connected, so the connect is done here.
void http_call::connect_unix(const net::generic::stream_protocol::endpoint& ep) {
  int rc =
      ::connect(conn_->sock().native_handle(), ep.data(), static_cast<socklen_t>(ep.size()));
  error_code err(rc == 0 ? 0 : errno, boost::system::system_category());
  if (err != net::error::would_block && err != net::error::try_again) {
    waiting_for_connection_ = false;
    if (err)
      return attempt_failed(
          map_transport(phase::connect, err, t_->url().origin(), spec_.what()));
    return on_connect({});
  }
  wait_for_connection(fail(ec::transient, spec_.what() + ": control plane at " +
                                              t_->url().origin() +
                                              " is busy (its accept queue is full)"));
}

/// The server takes no new connection for now (or this process has no descriptor for one);
/// the calls in flight will soon be done with theirs. Waits, in FIFO order with the lane's
/// other waiters, for the first of: a connection another call of this lane releases (handed
/// over directly), or the backoff (then one more connect, keeping its place in the queue if
/// that is refused too). Hammering a full accept queue with connects would only burn CPU on
/// both sides. Nothing of the request was sent, so this holds for every call, create and exec
/// included.
void http_call::wait_for_connection(failure busy) {
  drop_connection();
  auto wait = retry_.next(clock::now(), deadline_, std::nullopt);
  if (!wait) {
    waiting_for_connection_ = false;
    return finish(std::move(busy));
  }
  last_failure_ = std::make_unique<failure>(std::move(busy));
  if (!waiting_for_connection_) {
    waiting_for_connection_ = true;
    lane_->connection_waiters.push_back(weak_from_this());
  }
  if (!backoff_timer_) backoff_timer_ = std::make_unique<timer>(lane_->ioc);
  backoff_timer_->expires_after(*wait);
  backoff_timer_->async_wait([self = shared_from_this()](error_code) {
    if (!self->waiting_for_connection_) return; // a released connection came first
    self->attempt(); // still queued; also how an abort (deadline, shutdown) ends the wait
  });
}

void http_call::take_connection(std::unique_ptr<connection> c) {
  waiting_for_connection_ = false;
  backoff_timer_->cancel();
  if (stop_if_aborted()) {
    lane_->pool->release(std::move(c));
    return;
  }
  ++gen_;
  parser_.reset();
  conn_ = std::move(c);
  reused_ = true;
  send();
}

void http_call::on_connect(const error_code& err) {
  if (stop_if_aborted()) return;
  if (err)
    return attempt_failed(map_transport(phase::connect, err, t_->url().origin(), spec_.what()));
  error_code ignored;
  if (t_->url().socket_path.empty()) conn_->sock().set_option(tcp::no_delay(true), ignored);
  // Reads happen after a readiness wait: a read with nothing there must say so, not block.
  if (!conn_->sock().non_blocking()) conn_->sock().non_blocking(true, ignored);
  if (!conn_->tls()) return send();
  phase_ = phase::handshake;
  conn_->secure().async_handshake(
      net::ssl::stream_base::client,
      [self = shared_from_this()](error_code e) { self->on_handshake(e); });
}

void http_call::on_handshake(const error_code& err) {
  if (stop_if_aborted()) return;
  if (err)
    return attempt_failed(
        map_transport(phase::handshake, err, t_->url().origin(), spec_.what()));
  send();
}

void http_call::send() {
  reached_server_ = true;
  ++conn_->exchanges;
  phase_ = phase::write;
  written_ = false;
  readable_ = false;
  header_seen_ = false;
  streaming_ = false;
  parser_.emplace(spec_.body_cap, error_body_cap);
  parser_->header_limit(header_cap);
  auto body = spec_.body.pieces();
  std::array<net::const_buffer, 3> bufs{net::buffer(head_),
                                        net::buffer(body[0].data(), body[0].size()),
                                        net::buffer(body[1].data(), body[1].size())};
  auto g = gen_;
  if (conn_->tls()) {
    net::async_write(
        conn_->secure(), bufs,
        [self = shared_from_this(), g](error_code e, size_t) { self->on_write(e, g); });
    return;
  }
  // The readiness wait is queued before the write starts: an answer that arrives before
  // the write's handler ran still finds an operation waiting for it (edge-triggered).
  conn_->sock().async_wait(
      net::socket_base::wait_read,
      [self = shared_from_this(), g](error_code e) { self->on_readable(e, g); });
  net::async_write(conn_->sock(), bufs, [self = shared_from_this(), g](error_code e, size_t) {
    self->on_write(e, g);
  });
}

void http_call::on_write(const error_code& err, uint32_t gen) {
  if (gen != gen_ || stop_if_aborted()) return;
  if (err) {
    if (reused_ && !stale_retry_used_) return retry_fresh();
    return attempt_failed(map_transport(phase::write, err, t_->url().origin(), spec_.what()));
  }
  written_ = true;
  phase_ = phase::read;
  if (conn_->tls()) return read_tls();
  if (readable_) read_plain();
}

void http_call::on_readable(const error_code& err, uint32_t gen) {
  if (gen != gen_ || stop_if_aborted()) return;
  if (!written_) {
    readable_ = true; // read once the request is out (a read tells what happened)
    return;
  }
  if (err) return read_failed(err);
  read_plain();
}

void http_call::wait_readable() {
  conn_->sock().async_wait(
      net::socket_base::wait_read,
      [self = shared_from_this(), g = gen_](error_code e) { self->on_readable(e, g); });
}

void http_call::read_plain() {
  readable_ = false;
  auto* buf = lane_->read_buffer.get();
  for (;;) {
    error_code err;
    auto n = conn_->sock().read_some(net::buffer(buf, io_lane::read_buffer_size), err);
    if (err == net::error::would_block || err == net::error::try_again) return wait_readable();
    if (err) return read_failed(err);
    if (!consume(buf, n)) return;
    if (n < io_lane::read_buffer_size) // drained: the next bytes bring a new edge
      return wait_readable();
  }
}

void http_call::read_tls() {
  conn_->secure().async_read_some(net::buffer(conn_->tls_buffer(), connection::tls_buffer_size),
                                  [self = shared_from_this(), g = gen_](
                                      error_code e, size_t n) { self->on_tls_data(e, n, g); });
}

void http_call::on_tls_data(const error_code& err, size_t n, uint32_t gen) {
  if (gen != gen_ || stop_if_aborted()) return;
  if (n > 0 && !consume(conn_->tls_buffer(), n)) return;
  if (err) return read_failed(err);
  read_tls();
}

/// Feeds `n` bytes to the parser (after any kept from the previous read). False once the
/// call moved on (finished, failed, retrying): the caller stops reading.
bool http_call::consume(const char* data, size_t n) {
  auto& kept = conn_->pending;
  std::string_view in(data, n);
  if (!kept.empty()) {
    kept.append(data, n);
    in = kept;
  }
  for (;;) {
    if (!header_seen_ && parser_->is_header_done()) {
      header_seen_ = true;
      if (!on_header()) return false;
    }
    if (parser_->is_done() || in.empty()) break;
    error_code err;
    auto used = parser_->put(net::buffer(in.data(), in.size()), err);
    in.remove_prefix(used);
    if (err == http::error::need_more) break;
    if (err == http::error::body_limit) {
      over_cap();
      return false;
    }
    if (err) {
      attempt_failed(map_transport(phase::read, err, t_->url().origin(), spec_.what()));
      return false;
    }
    if (used == 0 && header_seen_ == parser_->is_header_done()) break;
  }
  // What the parser has not taken yet (a split header or chunk header) waits for more.
  if (in.empty())
    kept.clear();
  else if (!kept.empty())
    kept.erase(0, static_cast<size_t>(in.data() - kept.data()));
  else
    kept.assign(in.data(), in.size());
  if (streaming_ && !parser_->body.empty()) {
    auto f = sink_(parser_->body);
    parser_->body.clear();
    if (f) {
      drop_connection();
      finish(std::move(*f));
      return false;
    }
    if (stop_if_aborted()) // the sink's callbacks may have ended the call
      return false;
  }
  if (parser_->is_done()) {
    complete_body();
    return false;
  }
  return true;
}

bool http_call::on_header() {
  auto status = parser_->status;
  bool ok = ok_status(status);
  if (ok && sink_) {
    if (auto f = sink_({})) {
      drop_connection();
      finish(std::move(*f));
      return false;
    }
    streaming_ = true;
    parser_->eager(true);
    return true;
  }
  auto cap = ok ? spec_.body_cap : error_body_cap;
  // A declared length over the cap fails before a byte of body is read.
  if (auto len = parser_->content_length(); len && *len > cap) {
    over_cap();
    return false;
  }
  parser_->body_limit(cap);
  parser_->eager(true);
  return true;
}

void http_call::read_failed(error_code err) {
  if (err == net::error::eof) {
    // As Beast's read: EOF after some bytes ends a body delimited by the connection
    // closing, or is a partial message; before any byte it is end_of_stream.
    if (parser_->got_some()) {
      error_code e;
      parser_->put_eof(e);
      if (!e) {
        if (streaming_ && !parser_->body.empty() && !consume(nullptr, 0)) return;
        return complete_body();
      }
      err = e;
    } else {
      err = http::error::end_of_stream;
    }
  }
  if (!header_seen_) {
    bool nothing_read = !parser_->got_some() && conn_->pending.empty();
    bool closed = err == http::error::end_of_stream || err == net::error::eof ||
                  err == net::error::connection_reset;
    if (reused_ && !stale_retry_used_ && nothing_read && closed) return retry_fresh();
  }
  attempt_failed(map_transport(phase::read, err, t_->url().origin(), spec_.what()));
}

void http_call::complete_body() {
  auto status = parser_->status;
  keep_or_drop_connection();
  if (streaming_) return finish(std::string{});
  auto body = std::move(parser_->body);
  if (ok_status(status) && spec_.kind == body_kind::jsend) {
    if (auto data = success_data_of(body); data && take_data(*data))
      return finish(std::string{});
  }
  auto o = map_response(status, body, spec_.kind, spec_.what());
  if (o.value) return finish(std::move(o.value));
  attempt_failed(std::move(o));
}

void http_call::over_cap() {
  // The rest of the body is never read: the connection cannot be reused.
  drop_connection();
  auto status = parser_->status;
  if (!ok_status(status)) // judge an oversized error answer by its status alone
    return attempt_failed(map_response(status, {}, spec_.kind, spec_.what()));
  auto cap = std::to_string(spec_.body_cap);
  if (spec_.cap_is_artifact)
    return finish(
        fail(ec::artifact_too_large,
             spec_.what() + ": the file is larger than the cap of " + cap + " bytes"));
  finish(fail(ec::unavailable,
              spec_.what() + ": the control plane's reply is larger than " + cap + " bytes"));
}

void http_call::retry_fresh() {
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("{}: pooled connection was stale, sending once more on a fresh one",
                  spec_.what());
  stale_retry_used_ = true;
  skip_pool_ = true;
  drop_connection();
  attempt();
}

void http_call::attempt_failed(attempt_outcome o) {
  waiting_for_connection_ = false;
  drop_connection();
  if (!o.retryable || !spec_.idempotent) return finish(std::move(o.value));
  auto wait =
      retry_.next(clock::now(), deadline_, parser_ ? parser_->retry_after : std::nullopt);
  if (!wait) return finish(std::move(o.value));
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::debug("{}: {} — retry {} in {} ms", spec_.what(), o.value.error().message,
                  retry_.retries(), wait->count());
  last_failure_ = std::make_unique<failure>(o.value.error());
  if (!backoff_timer_) backoff_timer_ = std::make_unique<timer>(lane_->ioc);
  backoff_timer_->expires_after(*wait);
  backoff_timer_->async_wait([self = shared_from_this()](error_code) { self->attempt(); });
}

void http_call::keep_or_drop_connection() {
  if (!(conn_ && parser_ && parser_->is_done() && parser_->keep_alive() &&
        conn_->pending.empty()))
    return drop_connection();
  auto& waiters = lane_->connection_waiters;
  while (!waiters.empty()) {
    auto next = waiters.front().lock();
    waiters.pop_front();
    if (next && next->waiting_for_connection_ && !next->finished_) {
      next->waiting_for_connection_ = false; // taken: no other release goes to it
      // Posted: this call is still in the middle of its own completion.
      auto held = std::make_shared<std::unique_ptr<connection>>(std::move(conn_));
      net::post(lane_->ioc, [next, held] { next->take_connection(std::move(*held)); });
      return;
    }
  }
  lane_->pool->release(std::move(conn_));
}

void http_call::drop_connection() {
  if (conn_) {
    ++gen_; // its operations still pending complete (aborted) into a call that moved on
    conn_->close();
    conn_.reset();
  }
}

void http_call::finish(result<std::string> r) {
  if (finished_) return;
  finished_ = true;
  deadline_timer_.cancel();
  if (backoff_timer_) backoff_timer_->cancel();
  drop_connection();
  parser_.reset();
  if (enrolled_) t_->withdraw(this);
  sink_ = nullptr;
  try {
    deliver(std::move(r));
  } catch (const std::exception& e) {
    spdlog::error("{}: completion callback threw: {}", spec_.what(), e.what());
  } catch (...) {
    spdlog::error("{}: completion callback threw", spec_.what());
  }
}

} // namespace guestflow::cp
