#include "controlplane/client/reply_parser.hpp"

#include <algorithm>
#include <limits>

namespace guestflow::cp {

namespace http = boost::beast::http;

reply_parser::reply_parser(size_t ok_cap, size_t error_cap)
    : ok_cap_(ok_cap)
    , error_cap_(error_cap) {
  // Not boost::none: Beast 1.74 compares a Content-Length against an empty optional as
  // "over the limit". The call sets the real cap once the status is known.
  body_limit(std::numeric_limits<std::uint64_t>::max());
}

void reply_parser::on_response_impl(int code, string_view, int, error_code&) {
  status = static_cast<unsigned>(code);
}

void reply_parser::on_field_impl(http::field name, string_view, string_view v, error_code&) {
  if (name != http::field::retry_after || seen_retry_after_) return;
  seen_retry_after_ = true;
  if (v.empty() || v.size() > 6) return;
  uint64_t s = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return;
    s = s * 10 + static_cast<uint64_t>(c - '0');
  }
  retry_after = std::chrono::milliseconds{s * 1000};
}

void reply_parser::on_body_init_impl(const boost::optional<std::uint64_t>& length,
                                     error_code&) {
  if (!length) return;
  auto cap = status >= 200 && status < 300 ? ok_cap_ : error_cap_;
  body.reserve(static_cast<size_t>(std::min<std::uint64_t>(*length, cap)));
}

std::size_t reply_parser::on_body_impl(string_view part, error_code&) {
  body.append(part.data(), part.size());
  return part.size();
}

std::size_t reply_parser::on_chunk_body_impl(std::uint64_t, string_view part, error_code&) {
  body.append(part.data(), part.size());
  return part.size();
}

} // namespace guestflow::cp
