#pragma once

// The request-reading half of a control-plane connection (http_session.cpp), over any Beast
// stream: the session runs it on its socket, tests/fuzz/http_control_plane_request.cpp on a
// test stream, so the fuzzer feeds bytes through this very code — the header read, the
// framing check (transfer codings), the API key, target and route, the per-route cap
// checked on Content-Length, the JSON body's read and room, an upload's chunked reads.

#include "common/body_room.hpp"
#include "common/transfer_coding.hpp"
#include "controlplane/local/http/http_options.hpp"
#include "controlplane/local/http/replies.hpp"
#include "controlplane/local/http/routes.hpp"
#include "messages/jsend.hpp"
#include "messages/secret.hpp"

#include <algorithm>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace guestflow::local {

/// The most a request's start line and header fields may take together.
inline constexpr uint32_t max_header_bytes = 16 * 1024;
/// An upload's buffer: a body of known length up to this is read whole before the file opens.
inline constexpr size_t file_chunk = 256 * 1024;

/// What a request's header decides before any of its body is read.
struct header_verdict {
  enum class next : uint8_t { refuse, read_json, streamed };
  next then = next::refuse;
  reply refusal;         ///< refuse: the answer
  bool close = false;    ///< refuse: the connection ends after it (the body may be unread)
  std::string allow;     ///< a 405's Allow header
  bool has_body = false; ///< the request has a body (an early answer must close)
  request_target target; ///< found
  route matched;         ///< found
  uint64_t cap = 0;      ///< the body's cap: max_json_bytes, or max_file_bytes when streamed
};

/// A 413's answer (`got`: the Content-Length, 0 when a chunked body grew past the cap).
inline reply too_large(uint64_t got, uint64_t limit) {
  std::string what = got ? "request body of " + std::to_string(got) + " bytes" : "request body";
  return failure_reply(413, what + " exceeds the limit of " + std::to_string(limit) +
                                " bytes; send less");
}

template<class Stream>
class request_reader {
public:
  using head_parser = boost::beast::http::request_parser<boost::beast::http::empty_body>;
  using json_parser = boost::beast::http::request_parser<boost::beast::http::string_body>;
  using upload_parser = boost::beast::http::request_parser<boost::beast::http::buffer_body>;

  explicit request_reader(Stream& stream)
      : stream_(stream) {}

  boost::beast::flat_buffer& buffer() { return buf_; }
  head_parser& head() { return *head_; }
  bool header_started() const { return buf_.size() > 0 || (head_ && head_->got_some()); }

  /// Reads the next request's header; each route sets its own body limit after it.
  /// `h(error_code)`.
  template<class Handler>
  void read_header(Handler&& h) {
    give_back_body_room(buf_); // whatever room a request that failed half-way left
    head_.emplace();
    head_->header_limit(max_header_bytes);
    head_->body_limit(std::numeric_limits<uint64_t>::max());
    boost::beast::http::async_read_header(
        stream_, buf_, *head_,
        [h = std::forward<Handler>(h)](boost::system::error_code ec, size_t) mutable {
          h(ec);
        });
  }

  /// Judges a header read whole: framing, API key, target, route, body cap — in that order.
  header_verdict judge(const http_options& opts) const {
    header_verdict v;
    auto& req = head_->get();
    if (auto framing = check_framing(req); framing.status) { // its body cannot be told apart
      v.refusal = failure_reply(framing.status, "malformed HTTP request: " + framing.reason);
      v.close = true;
      return v;
    }
    v.has_body = head_->chunked() || head_->content_length().value_or(0) > 0;
    v.close = v.has_body;
    if (!opts.api_key.empty() && !same_secret(sv(req["X-Api-Key"]), opts.api_key)) {
      v.refusal = {401, jsend_error("missing or wrong X-Api-Key header", 401)};
      return v;
    }
    auto target = parse_target(sv(req.target()));
    if (!target) {
      v.refusal = failure_reply(target.error());
      return v;
    }
    v.target = std::move(*target);
    v.matched = match_route(sv(req.method_string()), v.target.path);
    auto method = std::string{sv(req.method_string())};
    if (v.matched.kind == route::outcome::not_found) {
      v.refusal = failure_reply(404, "no endpoint " + method + " " + v.target.path +
                                         " in the wire API v1");
      return v;
    }
    if (v.matched.kind == route::outcome::method_not_allowed) {
      v.allow = v.matched.allow;
      v.refusal = failure_reply(405, "method " + method + " is not allowed on " +
                                         v.target.path + "; use " + v.allow);
      return v;
    }
    bool streamed = v.matched.target->body == body_mode::streamed;
    v.cap = streamed ? opts.max_file_bytes : opts.max_json_bytes;
    if (auto len = head_->content_length(); len && *len > v.cap) {
      v.refusal = too_large(*len, v.cap);
      v.close = true;
      return v;
    }
    v.then = streamed ? header_verdict::next::streamed : header_verdict::next::read_json;
    return v;
  }

  bool expects_continue() const {
    return boost::beast::iequals(head_->get()[boost::beast::http::field::expect],
                                 "100-continue");
  }

  /// Reads a JSON route's body whole under `cap`, in room made for it and given back after.
  /// `h(error_code)`; then take it with json_body().
  template<class Handler>
  void read_json(uint64_t cap, Handler&& h) {
    body_.emplace(std::move(*head_));
    body_->body_limit(cap);
    reserve_body_room(buf_, body_->content_length());
    boost::beast::http::async_read(
        stream_, buf_, *body_,
        [this, h = std::forward<Handler>(h)](boost::system::error_code ec, size_t) mutable {
          give_back_body_room(buf_); // an exec holds the session for its whole run
          h(ec);
        });
  }

  std::string json_body() {
    auto body = std::move(body_->get().body());
    body_.reset();
    return body;
  }

  /// Takes the head over into an upload parser under `cap` with a buffer sized to the body
  /// when its length is known (a program is a few KiB; most uploads are far below the
  /// chunk), not zero-filled: the reads overwrite it.
  void begin_upload(uint64_t cap) {
    upload_.emplace(std::move(*head_));
    upload_->body_limit(cap);
    auto len = upload_->content_length();
    chunk_size_ =
        static_cast<size_t>(len ? std::clamp<uint64_t>(*len, 1, file_chunk) : file_chunk);
    chunk_.reset(new char[chunk_size_]);
    reserve_body_room(buf_, len);
  }

  bool upload_done() const { return upload_->is_done(); }
  const char* chunk() const { return chunk_.get(); }
  size_t chunk_size() const { return chunk_size_; }
  const upload_parser& upload() const { return *upload_; }

  /// Reads upload bytes into the chunk from `offset` on: `h(error_code, bytes read)`
  /// (Beast's need_buffer, a full chunk, is no error).
  template<class Handler>
  void read_upload(size_t offset, Handler&& h) {
    auto& body = upload_->get().body();
    body.data = chunk_.get() + offset;
    body.size = chunk_size_ - offset;
    boost::beast::http::async_read(stream_, buf_, *upload_,
                                   [this, offset, h = std::forward<Handler>(h)](
                                       boost::system::error_code ec, size_t) mutable {
                                     if (ec == boost::beast::http::error::need_buffer) ec = {};
                                     h(ec, chunk_size_ - offset - upload_->get().body().size);
                                   });
  }

  /// An idle keep-alive session keeps no upload buffer.
  void end_upload() {
    upload_.reset();
    chunk_.reset();
    chunk_size_ = 0;
    give_back_body_room(buf_);
  }

  /// Beast 1.74 speaks boost::string_view.
  static std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

private:
  Stream& stream_;
  boost::beast::flat_buffer buf_;
  std::optional<head_parser> head_;
  std::optional<json_parser> body_;
  std::optional<upload_parser> upload_;
  std::unique_ptr<char[]> chunk_; ///< the upload buffer, `chunk_size_` bytes, while a PUT runs
  size_t chunk_size_ = 0;
};

} // namespace guestflow::local
