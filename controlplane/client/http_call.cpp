#include "controlplane/client/http_call.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream_base.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>

namespace guestflow::cp {

namespace net = boost::asio;
namespace http = boost::beast::http;
using boost::system::error_code;
using std::chrono::milliseconds;

namespace {

/// Bodies of non-2xx answers are envelopes; more than this is not worth reading.
constexpr size_t error_body_cap = size_t{1} << 20;
constexpr uint32_t header_cap = 64 * 1024;

/// `Retry-After: <seconds>` (the HTTP-date form is ignored).
std::optional<milliseconds> retry_after_of(const http::response_header<>& h) {
  auto v = h[http::field::retry_after];
  if (v.empty() || v.size() > 6)
    return std::nullopt;
  uint64_t s = 0;
  for (char c : v) {
    if (c < '0' || c > '9')
      return std::nullopt;
    s = s * 10 + static_cast<uint64_t>(c - '0');
  }
  return milliseconds{s * 1000};
}

} // namespace

template <class F>
auto http_call::on_strand(F&& f) {
  return net::bind_executor(strand_, std::forward<F>(f));
}

std::shared_ptr<http_call> http_call::start(std::shared_ptr<transport> t, call_spec spec,
                                            completion done, body_sink sink) {
  auto c = std::make_shared<http_call>(t, std::move(spec), std::move(done), std::move(sink));
  auto begun = t->enroll(c, c->id_, [c] { net::dispatch(c->strand_, [c] { c->begin(); }); });
  if (!begun)
    c->finish(fail(ec::unavailable,
                   "control-plane client for " + t->url().origin() + " is shut down"));
  return c;
}

http_call::http_call(std::shared_ptr<transport> t, call_spec spec, completion done,
                     body_sink sink)
  : t_(std::move(t))
  , spec_(std::move(spec))
  , done_(std::move(done))
  , sink_(std::move(sink))
  , strand_(net::make_strand(t_->ioc()))
  , deadline_timer_(strand_)
  , backoff_timer_(strand_)
  , resolver_(strand_)
  , retry_(t_->cfg().retry_initial, t_->cfg().retry_max) {
  if (spec_.timeout.count() <= 0)
    spec_.timeout = t_->cfg().default_timeout;
  req_.method(spec_.method);
  req_.target(spec_.target);
  req_.version(11);
  req_.set(http::field::host, t_->url().host_header);
  req_.set(http::field::user_agent, "guestflow/0.1");
  req_.set(http::field::accept,
           spec_.kind == body_kind::raw && !sink_ ? "*/*" : "application/json");
  if (!t_->ep().api_key.empty())
    req_.set("X-Api-Key", t_->ep().api_key);
  if (!spec_.content_type.empty()) {
    req_.set(http::field::content_type, spec_.content_type);
    req_.body() = std::move(spec_.body);
  }
  req_.keep_alive(true);
  req_.prepare_payload();
}

void http_call::abort(failure why) {
  // A weak reference: a queued abort must not keep the call (and through it the transport
  // that owns the io_context holding the queue) alive.
  net::post(strand_, [weak = weak_from_this(), why = std::move(why)]() mutable {
    if (auto self = weak.lock(); self && !self->finished_)
      self->interrupt(std::move(why));
  });
}

milliseconds http_call::remaining() const {
  auto left = std::chrono::duration_cast<milliseconds>(deadline_ - clock::now());
  return std::max(left, milliseconds{0});
}

void http_call::begin() {
  deadline_ = clock::now() + spec_.timeout;
  deadline_timer_.expires_at(deadline_);
  deadline_timer_.async_wait(on_strand([self = shared_from_this()](error_code err) {
    if (err || self->finished_)
      return;
    // Until an attempt reaches the server (backoff, resolve, connect, TLS), the previous
    // attempt's failure explains more than "timed out": a control plane that refused every
    // connection until the deadline is unreachable (unavailable), not slow (transient).
    self->interrupt(!self->reached_server_ && self->last_failure_
                      ? *self->last_failure_
                      : deadline_failure(self->spec_.what, self->spec_.timeout));
  }));
  attempt();
}

void http_call::interrupt(failure why) {
  if (!aborted_)
    aborted_ = std::move(why);
  resolver_.cancel();
  backoff_timer_.cancel();
  if (conn_)
    conn_->close();
}

bool http_call::stop_if_aborted() {
  if (finished_)
    return true;
  if (!aborted_)
    return false;
  finish(*aborted_);
  return true;
}

void http_call::attempt() {
  reached_server_ = false;
  if (stop_if_aborted())
    return;
  parser_.reset();
  buffer_.consume(buffer_.size());
  status_ = 0;
  retry_after_.reset();
  conn_ = skip_pool_ ? nullptr : t_->pool().acquire();
  skip_pool_ = false;
  reused_ = conn_ != nullptr;
  if (reused_)
    return send();
  // An IP literal (the local control plane's 127.0.0.1) needs no lookup: the resolver
  // would hop to its own thread and back for every new connection.
  boost::system::error_code not_literal;
  auto addr = net::ip::make_address(t_->url().host, not_literal);
  if (!not_literal)
    return connect_to({tcp::endpoint{addr, t_->url().port}});
  resolver_.async_resolve(t_->url().host, std::to_string(t_->url().port),
                          on_strand([self = shared_from_this()](
                                      error_code err, tcp::resolver::results_type r) {
                            self->on_resolve(err, r);
                          }));
}

void http_call::on_resolve(const error_code& err, const tcp::resolver::results_type& r) {
  if (stop_if_aborted())
    return;
  if (err)
    return attempt_failed(map_transport(phase::resolve, err, t_->url().origin(), spec_.what));
  std::vector<tcp::endpoint> eps;
  for (const auto& e : r)
    eps.push_back(e.endpoint());
  connect_to(std::move(eps));
}

void http_call::connect_to(std::vector<tcp::endpoint> eps) {
  if (!t_->url().tls)
    eps.erase(std::remove_if(eps.begin(), eps.end(),
                             [](const tcp::endpoint& e) { return !is_loopback_address(e.address()); }),
              eps.end());
  if (eps.empty())
    return finish(fail(ec::policy_refused, "control plane host " + t_->url().host
                                             + " does not resolve to a loopback address; "
                                               "plain http is only allowed to loopback"));
  conn_ = t_->open_connection();
  conn_->tcp().expires_after(remaining());
  conn_->tcp().async_connect(
    eps, on_strand([self = shared_from_this()](error_code e, const tcp::endpoint&) {
      self->on_connect(e);
    }));
}

void http_call::on_connect(const error_code& err) {
  if (stop_if_aborted())
    return;
  if (err)
    return attempt_failed(map_transport(phase::connect, err, t_->url().origin(), spec_.what));
  error_code ignored;
  conn_->tcp().socket().set_option(tcp::no_delay(true), ignored);
  if (!conn_->tls())
    return send();
  conn_->tcp().expires_after(remaining());
  conn_->secure().async_handshake(
    net::ssl::stream_base::client,
    on_strand([self = shared_from_this()](error_code e) { self->on_handshake(e); }));
}

void http_call::on_handshake(const error_code& err) {
  if (stop_if_aborted())
    return;
  if (err)
    return attempt_failed(
      map_transport(phase::handshake, err, t_->url().origin(), spec_.what));
  send();
}

void http_call::send() {
  reached_server_ = true;
  ++conn_->exchanges;
  conn_->tcp().expires_after(remaining());
  conn_->visit([&](auto& stream) {
    http::async_write(stream, req_,
                      on_strand([self = shared_from_this()](error_code e, size_t) {
                        self->on_write(e);
                      }));
  });
}

void http_call::on_write(const error_code& err) {
  if (stop_if_aborted())
    return;
  if (err) {
    if (reused_ && !stale_retry_used_ && err != boost::beast::error::timeout)
      return retry_fresh();
    return attempt_failed(map_transport(phase::write, err, t_->url().origin(), spec_.what));
  }
  parser_.emplace();
  parser_->header_limit(header_cap);
  // The cap depends on the status, so it is set once the header is in (on_header). Not
  // boost::none: Beast 1.74 compares a Content-Length against an empty optional as
  // "over the limit".
  parser_->body_limit(std::numeric_limits<uint64_t>::max());
  conn_->tcp().expires_after(remaining());
  conn_->visit([&](auto& stream) {
    http::async_read_header(stream, buffer_, *parser_,
                            on_strand([self = shared_from_this()](error_code e, size_t) {
                              self->on_header(e);
                            }));
  });
}

void http_call::on_header(const error_code& err) {
  if (stop_if_aborted())
    return;
  if (err) {
    bool nothing_read = !parser_->got_some() && buffer_.size() == 0;
    bool closed = err == http::error::end_of_stream || err == net::error::eof
                  || err == net::error::connection_reset;
    if (reused_ && !stale_retry_used_ && nothing_read && closed)
      return retry_fresh();
    return attempt_failed(map_transport(phase::read, err, t_->url().origin(), spec_.what));
  }
  auto& res = parser_->get();
  status_ = res.result_int();
  retry_after_ = retry_after_of(res.base());
  bool ok = status_ >= 200 && status_ < 300;
  if (ok && sink_) {
    if (auto f = sink_({})) {
      drop_connection();
      return finish(std::move(*f));
    }
    return read_stream();
  }
  auto cap = ok ? spec_.body_cap : error_body_cap;
  // A declared length over the cap fails before a byte of body is read.
  if (auto len = parser_->content_length(); len && *len > cap)
    return over_cap();
  parser_->body_limit(cap);
  conn_->tcp().expires_after(remaining());
  conn_->visit([&](auto& stream) {
    http::async_read(stream, buffer_, *parser_,
                     on_strand([self = shared_from_this()](error_code e, size_t) {
                       self->on_body(e);
                     }));
  });
}

void http_call::on_body(const error_code& err) {
  if (stop_if_aborted())
    return;
  if (err == http::error::body_limit)
    return over_cap();
  if (err)
    return attempt_failed(map_transport(phase::read, err, t_->url().origin(), spec_.what));
  auto body = std::move(parser_->get().body());
  keep_or_drop_connection();
  auto o = map_response(status_, body, spec_.kind, spec_.what);
  if (o.value)
    return finish(std::move(o.value));
  attempt_failed(std::move(o));
}

void http_call::over_cap() {
  // The rest of the body is never read: the connection cannot be reused.
  drop_connection();
  bool ok = status_ >= 200 && status_ < 300;
  if (!ok) // judge an oversized error answer by its status alone
    return attempt_failed(map_response(status_, {}, spec_.kind, spec_.what));
  auto cap = std::to_string(spec_.body_cap);
  if (spec_.cap_is_artifact)
    return finish(fail(ec::artifact_too_large,
                       spec_.what + ": the file is larger than the cap of " + cap + " bytes"));
  finish(fail(ec::unavailable,
              spec_.what + ": the control plane's reply is larger than " + cap + " bytes"));
}

void http_call::read_stream() {
  if (parser_->is_done()) {
    keep_or_drop_connection();
    return finish(std::string{});
  }
  conn_->tcp().expires_after(remaining());
  conn_->visit([&](auto& stream) {
    http::async_read_some(stream, buffer_, *parser_,
                          on_strand([self = shared_from_this()](error_code e, size_t) {
                            self->on_stream(e);
                          }));
  });
}

void http_call::on_stream(const error_code& err) {
  if (stop_if_aborted())
    return;
  auto& body = parser_->get().body();
  if (!body.empty()) {
    auto f = sink_(body);
    body.clear();
    if (f) {
      drop_connection();
      return finish(std::move(*f));
    }
    if (stop_if_aborted()) // the sink's callbacks may have ended the call
      return;
  }
  if (err)
    return attempt_failed(map_transport(phase::read, err, t_->url().origin(), spec_.what));
  read_stream();
}

void http_call::retry_fresh() {
  spdlog::debug("{}: pooled connection was stale, sending once more on a fresh one",
                spec_.what);
  stale_retry_used_ = true;
  skip_pool_ = true;
  drop_connection();
  attempt();
}

void http_call::attempt_failed(attempt_outcome o) {
  drop_connection();
  if (!o.retryable || !spec_.idempotent)
    return finish(std::move(o.value));
  auto wait = retry_.next(clock::now(), deadline_, retry_after_);
  if (!wait)
    return finish(std::move(o.value));
  spdlog::debug("{}: {} — retry {} in {} ms", spec_.what, o.value.error().message,
                retry_.retries(), wait->count());
  last_failure_ = o.value.error();
  backoff_timer_.expires_after(*wait);
  backoff_timer_.async_wait(
    on_strand([self = shared_from_this()](error_code) { self->attempt(); }));
}

void http_call::keep_or_drop_connection() {
  if (conn_ && parser_ && parser_->is_done() && parser_->get().keep_alive())
    t_->pool().release(std::move(conn_));
  else
    drop_connection();
}

void http_call::drop_connection() {
  if (conn_) {
    conn_->close();
    conn_.reset();
  }
}

void http_call::finish(result<std::string> r) {
  if (finished_)
    return;
  finished_ = true;
  deadline_timer_.cancel();
  backoff_timer_.cancel();
  drop_connection();
  parser_.reset();
  buffer_ = {};
  if (id_ != 0)
    t_->withdraw(id_);
  auto done = std::move(done_);
  sink_ = nullptr;
  try {
    done(std::move(r));
  } catch (const std::exception& e) {
    spdlog::error("{}: completion callback threw: {}", spec_.what, e.what());
  } catch (...) {
    spdlog::error("{}: completion callback threw", spec_.what);
  }
}

} // namespace guestflow::cp
