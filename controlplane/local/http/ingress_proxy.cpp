#include "controlplane/local/http/ingress_proxy.hpp"

#include "common/transfer_coding.hpp"
#include "controlplane/forward/http_forward.hpp"
#include "controlplane/local/http/replies.hpp"
#include "controlplane/local/network/netns_socket.hpp"
#include "messages/jsend.hpp"
#include "messages/json.hpp"
#include "messages/secret.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <memory>
#include <poll.h>
#include <sys/socket.h>

namespace guestflow::local {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using stream_protocol = net::generic::stream_protocol;
using error_code = boost::system::error_code;

namespace {

std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

/// One proxied connection of a guest counted while alive (http_context::ingress_open).
class ingress_slot {
public:
  ingress_slot(http_context& ctx, std::string id)
      : ctx_(ctx)
      , id_(std::move(id)) {}
  ingress_slot(const ingress_slot&) = delete;
  ingress_slot& operator=(const ingress_slot&) = delete;
  ~ingress_slot() {
    if (!held_) return;
    std::lock_guard<std::mutex> lock{ctx_.ingress_mu};
    auto i = ctx_.ingress_open.find(id_);
    if (i != ctx_.ingress_open.end() && --i->second == 0) ctx_.ingress_open.erase(i);
  }
  /// False past the cap.
  bool take() {
    std::lock_guard<std::mutex> lock{ctx_.ingress_mu};
    auto& n = ctx_.ingress_open[id_];
    if (n >= ctx_.options.max_ingress_connections) {
      if (n == 0) ctx_.ingress_open.erase(id_);
      return false;
    }
    ++n;
    held_ = true;
    return true;
  }

private:
  http_context& ctx_;
  std::string id_;
  bool held_ = false;
};

/// Waits (deadline) for a relay's first byte: true once it connected, false at EOF (nothing
/// listens, or the relay could not start) or past the deadline.
bool relay_ready(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  if (::poll(&pfd, 1, 20000) <= 0) return false;
  char c;
  return ::recv(fd, &c, 1, 0) == 1;
}

/// A failure with a code of its own in the answer: `{"status":"error","message":…,
/// "code":502,"data":{"code":"guest_port_closed"}}`.
reply coded(unsigned status, std::string_view code, const std::string& message) {
  auto body = failure_reply(status, message).body;
  body.pop_back();
  return {status, body + R"(,"data":{"code":)" + quote_json(code) + "}}"};
}

class ingress_call : public std::enable_shared_from_this<ingress_call> {
public:
  ingress_call(client_stream& stream, beast::flat_buffer& buf,
               http::request_parser<http::empty_body>& head, ingress_request req,
               http_context& ctx, ingress_cache& cache, std::function<void(after_ingress)> then)
      : stream_(stream)
      , buf_(buf)
      , head_(head)
      , req_(std::move(req))
      , ctx_(ctx)
      , cache_(cache)
      , then_(std::move(then))
      , slot_(ctx, req_.id) {}
  ~ingress_call() { release_relay(); } // a call that never finished: never reaped here

  void start() {
    auto& h = head_.get();
    version_ = h.version();
    has_body_ = head_.chunked() || head_.content_length().value_or(0) > 0;
    if (auto framing = check_framing(h); framing.status)
      return answer(failure_reply(framing.status, "malformed HTTP request: " + framing.reason),
                    true);
    std::optional<std::string> token;
    const auto& key = ctx_.options.api_key;
    if (!key.empty() && !same_secret(sv(h["X-Api-Key"]), key)) {
      token = offered_token(sv(h[std::string{ingress_token_header}]), req_.query_token,
                            sv(h[http::field::cookie]));
      if (!token)
        return answer(failure_reply(401, "a service URL needs the sandbox's ingress token (" +
                                             std::string{ingress_token_header} +
                                             " header, ?token= or its cookie) or X-Api-Key"),
                      has_body_);
    }
    // The token passed as ?token= (a browser): checked, then swapped for a cookie by a
    // redirect to the same URL without it, so it leaves the address bar and the history.
    bool set_cookie =
        token && sv(h[std::string{ingress_token_header}]).empty() && req_.query_token;
    // `…/ports/P` without its slash: the app's relative links resolve below the prefix only
    // with it (upstream_target starts with '/').
    if (req_.needs_slash && !set_cookie)
      return redirect(req_.prefix + req_.upstream_target, {});
    if (auto len = head_.content_length(); len && *len > ctx_.options.max_file_bytes)
      return answer(too_large_reply(*len), true);
    if (!slot_.take())
      return answer(
          failure_reply(429, "sandbox " + req_.id + " has " +
                                 std::to_string(ctx_.options.max_ingress_connections) +
                                 " service-URL connections open; retry later"),
          has_body_);
    if (!set_cookie && reuse(token)) return forward();
    net::post(ctx_.workers, [self = shared_from_this(), token, set_cookie] {
      auto target = self->ctx_.service.open_ingress(self->req_.id, token);
      result<unique_fd> sock = fail(ec::unavailable, "not made");
      std::optional<ingress_relay> relay;
      bool relay_connected = false;
      if (target && target->authorized && !set_cookie) {
        if (target->relay) {
          auto r = target->relay(self->req_.port);
          if (r) {
            relay_connected = relay_ready(r->sock.get());
            relay = std::move(*r);
            sock = unique_fd{};
          } else {
            sock = r.error();
          }
        } else {
          sock = socket_in_netns(target->netns.get());
        }
      }
      net::post(self->stream_.get_executor(),
                [self, target = std::move(target), sock = std::move(sock),
                 relay = std::move(relay), relay_connected, token, set_cookie]() mutable {
                  if (relay) {
                    self->relay_end_ = std::move(relay->end);
                    self->relayed_ = relay_connected ? 1 : 2;
                    sock = std::move(relay->sock);
                  }
                  self->opened(std::move(target), std::move(sock), token, set_cookie);
                });
    });
  }

private:
  /// The upstream connection the last request left, when it is for this guest and port,
  /// still open, and the guest still runs with this token valid.
  bool reuse(const std::optional<std::string>& token) {
    auto kept = std::move(cache_.upstream);
    cache_.upstream.reset();
    if (!kept || cache_.id != req_.id || cache_.port != req_.port) return false;
    char c;
    auto n = ::recv(kept->native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return false; // closed
    auto pass = ctx_.service.ingress_ready(req_.id, token);
    if (!pass) return false;
    lease_ = std::move(pass->lease);
    leased_ = true;
    lease_blocks_ = pass->release_blocks;
    upstream_ = std::move(kept);
    return true;
  }

  /// Ends the lease once (forwarded() and finish() both call it): here when its release
  /// only counts (a kept connection's request to a guest that is not persistent: no worker
  /// woken, a futex and a context switch saved per request), else on a worker (it writes
  /// the guest's record).
  void release_lease() {
    if (!std::exchange(leased_, false)) return;
    if (!lease_blocks_) return lease_.reset();
    net::post(ctx_.workers,
              [l = std::make_shared<activity_lease>(std::move(lease_))] { l->reset(); });
  }

  reply too_large_reply(uint64_t got) {
    return failure_reply(413, "request body of " + std::to_string(got) +
                                  " bytes exceeds the limit of " +
                                  std::to_string(ctx_.options.max_file_bytes) + " bytes");
  }

  void opened(result<ingress_target> target, result<unique_fd> sock,
              const std::optional<std::string>& token, bool set_cookie) {
    if (target) {
      lease_ = std::move(target->lease);
      leased_ = true;
    }
    if (!target) return answer(failure_reply(target.error()), has_body_);
    if (!target->authorized)
      return answer(failure_reply(401, "wrong ingress token for sandbox " + req_.id),
                    has_body_);
    if (set_cookie)
      return redirect(req_.prefix + req_.upstream_target, ingress_cookie_for(req_, *token));
    if (!sock) return answer(failure_reply(sock.error()), has_body_);
    if (relayed_) return relay_opened(std::move(*sock));
    if (!target->netns) return answer(failure_reply(503, "service URL: no netns"), has_body_);
    upstream_.emplace(stream_.get_executor());
    error_code ec;
    upstream_->assign(stream_protocol{AF_INET, IPPROTO_TCP}, sock->release(), ec);
    if (ec) return answer(failure_reply(503, "service URL: " + ec.message()), has_body_);
    stream_protocol::endpoint to{
        net::ip::tcp::endpoint{net::ip::address_v4::loopback(), req_.port}};
    upstream_->async_connect(to, [self = shared_from_this()](error_code ec) {
      if (ec) {
        auto what = ec == net::error::connection_refused ? "nothing listens on port "
                                                         : "cannot connect to port ";
        return self->answer(
            coded(502, "guest_port_closed",
                  std::string{what} + std::to_string(self->req_.port) + " in sandbox " +
                      self->req_.id +
                      (ec == net::error::connection_refused ? std::string{}
                                                            : " (" + ec.message() + ")")),
            self->has_body_);
      }
      // The request's header and its body chunks go as separate writes: Nagle would hold
      // each for the guest's delayed ACK.
      error_code ignored;
      self->upstream_->set_option(net::ip::tcp::no_delay(true), ignored);
      self->forward();
    });
  }

  /// A gVisor guest's relay socket (ingress_target::relay): its byte said connected, or
  /// nothing listens. Not kept for the next request: the relay ends with its connection.
  void relay_opened(unique_fd sock) {
    if (relayed_ != 1)
      return answer(coded(502, "guest_port_closed",
                          "nothing listens on port " + std::to_string(req_.port) +
                              " in sandbox " + req_.id),
                    has_body_);
    upstream_.emplace(stream_.get_executor());
    error_code ec;
    upstream_->assign(stream_protocol{AF_UNIX, 0}, sock.release(), ec);
    if (ec) return answer(failure_reply(503, "service URL: " + ec.message()), has_body_);
    forward();
  }

  /// Ends a relay (its socket closed by now or soon): on a worker, which waits for it.
  void release_relay() {
    if (!std::exchange(relayed_, 0)) return;
    net::post(ctx_.workers,
              [l = std::make_shared<activity_lease>(std::move(relay_end_))] { l->reset(); });
  }

  void forward() {
    forward::forward_options o;
    o.target = req_.upstream_target;
    o.max_body_bytes = ctx_.options.max_file_bytes;
    o.idle_timeout = ctx_.options.idle_timeout;
    o.drop_fields = {"Authorization", "X-Api-Key", std::string{ingress_token_header}};
    o.drop_cookies = {std::string{ingress_cookie}};
    if (!relayed_)
      o.keep_upstream = [self = shared_from_this()](stream_protocol::socket s) {
        self->cache_.id = self->req_.id;
        self->cache_.port = self->req_.port;
        self->cache_.upstream.emplace(std::move(s));
      };
    forward::forward_exchange(
        stream_, buf_, head_, std::move(*upstream_), std::move(o),
        [self = shared_from_this()](forward::forward_outcome r) { self->forwarded(r); });
  }

  void forwarded(const forward::forward_outcome& r) {
    release_lease();
    using k = forward::forward_outcome::kind;
    if (r.answered)
      return finish(r.keep_alive    ? after_ingress::next
                    : r.body_unread ? after_ingress::linger
                                    : after_ingress::close);
    switch (r.what) {
    case k::body_too_large:
      return answer(failure_reply(413, "request body exceeds the limit of " +
                                           std::to_string(ctx_.options.max_file_bytes) +
                                           " bytes"),
                    true);
    case k::upstream_failed:
      return answer(coded(502, "guest_port_closed",
                          "the service on port " + std::to_string(req_.port) + " in sandbox " +
                              req_.id + " closed the connection: " + r.error),
                    true);
    default:
      return finish(after_ingress::close);
    }
  }

  void redirect(const std::string& location, const std::string& cookie) {
    auto res =
        std::make_shared<http::response<http::string_body>>(http::status::see_other, version_);
    res->set(http::field::location, location);
    if (!cookie.empty()) res->set(http::field::set_cookie, cookie);
    res->set(http::field::cache_control, "no-store");
    write(res, has_body_);
  }

  void answer(reply r, bool close) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(r.status), version_);
    res->set(http::field::content_type, r.content_type);
    res->body() = std::move(r.body);
    write(res, close);
  }

  void write(std::shared_ptr<http::response<http::string_body>> res, bool close) {
    res->keep_alive(!close && head_.get().keep_alive());
    res->prepare_payload();
    stream_.expires_after(ctx_.options.idle_timeout);
    http::async_write(
        stream_, *res, [self = shared_from_this(), res, close](error_code ec, size_t) {
          if (ec) return self->finish(after_ingress::close);
          if (close) return self->finish(after_ingress::linger);
          self->finish(res->keep_alive() ? after_ingress::next : after_ingress::close);
        });
  }

  void finish(after_ingress a) {
    release_lease();
    release_relay();
    if (auto then = std::exchange(then_, nullptr)) then(a);
  }

  client_stream& stream_;
  beast::flat_buffer& buf_;
  http::request_parser<http::empty_body>& head_; ///< the connection's; moved from by forward()
  ingress_request req_;
  http_context& ctx_;
  ingress_cache& cache_;
  std::function<void(after_ingress)> then_;
  ingress_slot slot_;
  activity_lease lease_;
  bool leased_ = false;      ///< lease_ holds a lease not yet released
  bool lease_blocks_ = true; ///< its release may write the guest's record: on a worker
  std::optional<stream_protocol::socket> upstream_;
  activity_lease relay_end_; ///< a gVisor guest's relay, reaped on a worker (release_relay)
  int relayed_ = 0;          ///< 0: no relay; 1: it connected; 2: nothing listened
  unsigned version_ = 11;
  bool has_body_ = false;
};

} // namespace

void serve_ingress(client_stream& stream, beast::flat_buffer& buf,
                   http::request_parser<http::empty_body>& head, ingress_request req,
                   http_context& ctx, ingress_cache& cache,
                   std::function<void(after_ingress)> then) {
  std::make_shared<ingress_call>(stream, buf, head, std::move(req), ctx, cache, std::move(then))
      ->start();
}

} // namespace guestflow::local
