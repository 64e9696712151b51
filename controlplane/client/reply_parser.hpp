#pragma once

#include <boost/beast/http/basic_parser.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace guestflow::cp {

/// A response parser that keeps only what a call uses: the status, `Retry-After` and the
/// body (keep-alive and the framing are basic_parser's). Unlike `response_parser`, it
/// allocates no header fields: one allocation per reply at most (the body).
class reply_parser final : public boost::beast::http::basic_parser<false> {
public:
  using error_code = boost::beast::error_code;
  using string_view = boost::beast::string_view;

  /// `ok_cap`/`error_cap`: the most a body is reserved up front for a 2xx/other status
  /// (a declared length over the cap is refused by the call before a body byte is read).
  reply_parser(size_t ok_cap, size_t error_cap);

  unsigned status = 0;
  /// `Retry-After: <seconds>` (the HTTP-date form is ignored); the first one counts.
  std::optional<std::chrono::milliseconds> retry_after;
  /// The body read so far (a streaming call takes it after every read).
  std::string body;

private:
  void on_request_impl(boost::beast::http::verb, string_view, string_view, int,
                       error_code&) override {}
  void on_response_impl(int code, string_view, int, error_code&) override;
  void on_field_impl(boost::beast::http::field name, string_view, string_view value,
                     error_code&) override;
  void on_header_impl(error_code&) override {}
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override;
  std::size_t on_body_impl(string_view part, error_code&) override;
  void on_chunk_header_impl(std::uint64_t, string_view, error_code&) override {}
  std::size_t on_chunk_body_impl(std::uint64_t, string_view part, error_code&) override;
  void on_finish_impl(error_code&) override {}

  size_t ok_cap_;
  size_t error_cap_;
  bool seen_retry_after_ = false;
};

} // namespace guestflow::cp
