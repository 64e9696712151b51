#pragma once

// The transport's own header (Asio types): server.cpp and connection.cpp only, and the
// fuzz target that drives the request reader (tests/fuzz/http_bridge_request.cpp).

#include "bridge/server/server.hpp"
#include "common/body_room.hpp"
#include "common/transfer_coding.hpp"
#include "messages/secret.hpp"

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace guestflow::bridge {

/// Serves one accepted connection until it closes (the session keeps itself alive).
void serve_connection(boost::asio::ip::tcp::socket socket, server_context& ctx);

/// The most a request's start line and header fields may take together.
inline constexpr uint32_t max_header_bytes = 16 * 1024;

/// The matched route's body cap within the server's (bridge/API.md, "Limits"); the
/// server's own when no route matched.
inline uint64_t body_cap(const route* r, const server_options& opts) {
  if (!r) return opts.max_body_bytes;
  if (r->max_body_bytes) return std::min(*r->max_body_bytes, opts.max_body_bytes);
  auto& m = r->method;
  return m == "GET" || m == "HEAD" || m == "DELETE" ? 0 : opts.max_body_bytes;
}

/// What the header of a request decides before any of its body is read. The slot check
/// (which asks the service) comes after it, in the connection.
struct header_verdict {
  enum class next : uint8_t { refuse, read_body, dispatch };
  next then = next::refuse;
  failure refusal;               ///< refuse: why
  unsigned status = 0;           ///< refuse: the transport's status (0: the code's)
  bool close = false;            ///< refuse: the framing is untrusted, keep-alive is off
  std::string allow;             ///< a 405's Allow header
  const route* target = nullptr; ///< the matched route (refuse: when one matched)
  route_params params;           ///< found
  uint64_t cap = 0;              ///< the body cap of the route
};

/// The request-reading half of a connection, over any Beast stream: the server's
/// beast::tcp_stream and the fuzz target's beast::test::stream run this same code (the
/// header and body reads, the framing, route, token and per-route cap checks, the body's
/// room). It owns the connection's read buffer and the request's parser.
template<class Stream>
class request_reader {
public:
  using parser_type = boost::beast::http::request_parser<boost::beast::http::string_body>;

  explicit request_reader(Stream& stream)
      : stream_(stream) {}

  parser_type& parser() { return *parser_; }
  const parser_type& parser() const { return *parser_; }
  bool has_parser() const { return parser_.has_value(); }
  boost::beast::flat_buffer& buffer() { return buf_; }

  /// Reads the next request's header into a fresh parser: 16 KiB for the header, no body
  /// limit yet (set after the header: a length over the cap is refused after the token
  /// check). `h(error_code)`.
  template<class Handler>
  void read_header(Handler&& h) {
    parser_.emplace();
    parser_->header_limit(max_header_bytes);
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    boost::beast::http::async_read_header(
        stream_, buf_, *parser_,
        [h = std::forward<Handler>(h)](boost::system::error_code ec, size_t) mutable {
          h(ec);
        });
  }

  /// Judges a header read whole: framing, route, token, body cap — in that order.
  header_verdict judge(const route_table& routes, const server_options& opts) {
    header_verdict v;
    auto& req = parser_->get();
    if (auto framing = check_framing(req); framing.status) { // its body cannot be told apart
      v.refusal = fail(ec::bad_request, "malformed HTTP request: " + framing.reason);
      v.status = framing.status;
      v.close = true;
      return v;
    }
    auto method = sv(req.method_string());
    auto target = sv(req.target());
    auto r = routes.match(method, target);
    if (!r) {
      v.refusal = r.error();
      return v;
    }
    if (r->kind == route_match::outcome::not_found) {
      auto what = std::string{method} + " " + std::string{target.substr(0, target.find('?'))};
      v.refusal = fail(ec::not_found, "no endpoint " + what + " (see bridge/API.md)");
      return v;
    }
    if (r->kind == route_match::outcome::method_not_allowed) {
      v.allow = r->allow;
      v.refusal =
          fail(ec::bad_request, "method " + std::string{method} + " is not allowed on " +
                                    std::string{target} + "; use " + v.allow);
      v.status = 405;
      return v;
    }
    v.target = r->target;
    v.params = std::move(r->params);
    v.cap = body_cap(v.target, opts);
    if (!v.target->open && !opts.token.empty() &&
        !authorized(sv(req[boost::beast::http::field::authorization]), opts.token)) {
      v.refusal =
          fail(ec::policy_refused,
               "missing or wrong bearer token (Authorization: Bearer <GUESTFLOW_TOKEN>)");
      v.status = 401;
      return v;
    }
    if (auto len = parser_->content_length(); len && *len > v.cap) {
      v.refusal = too_large(v.target, opts);
      v.status = 413;
      return v;
    }
    v.then =
        parser_->is_done() ? header_verdict::next::dispatch : header_verdict::next::read_body;
    return v;
  }

  /// Reads the body under `cap`, with room for a body of known length made first and given
  /// back after. `h(error_code)`.
  template<class Handler>
  void read_body(uint64_t cap, Handler&& h) {
    parser_->body_limit(cap);
    reserve_body_room(buf_, parser_->content_length());
    boost::beast::http::async_read(
        stream_, buf_, *parser_,
        [this, h = std::forward<Handler>(h)](boost::system::error_code ec, size_t) mutable {
          give_back_body_room(buf_); // a streamed answer holds the connection for long
          h(ec);
        });
  }

  /// Whether a failed read had received part of a request (a 408 is owed, not a close).
  bool started() const { return parser_ && (parser_->got_some() || buf_.size() > 0); }

  /// The 413's failure: which cap a body passed.
  static failure too_large(const route* r, const server_options& opts) {
    auto which = r && r->max_body_bytes && *r->max_body_bytes < opts.max_body_bytes
                     ? r->method + " " + r->pattern + " (bridge/API.md)"
                     : std::string{"GUESTFLOW_MAX_BODY_BYTES"};
    return fail(ec::bad_request, "request body exceeds the limit of " +
                                     std::to_string(body_cap(r, opts)) + " bytes of " + which);
  }

  /// Beast 1.74 speaks boost::string_view.
  static std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

private:
  static bool authorized(std::string_view header, const std::string& token) {
    constexpr std::string_view scheme = "bearer ";
    if (header.size() < scheme.size() ||
        !boost::beast::iequals(boost::beast::string_view{header.data(), scheme.size()},
                               boost::beast::string_view{scheme.data(), scheme.size()}))
      return false;
    return same_secret(header.substr(scheme.size()), token);
  }

  Stream& stream_;
  boost::beast::flat_buffer buf_;
  std::optional<parser_type> parser_;
};

} // namespace guestflow::bridge
