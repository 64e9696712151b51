#include "common/transfer_coding.hpp"

#include "common/text.hpp"

namespace guestflow {

framing_verdict check_framing(const std::vector<std::string_view>& codings, bool has_length,
                              unsigned version) {
  if (codings.empty()) return {};
  size_t chunked = 0;
  for (auto field : codings) {
    auto list = split(field, ",");
    if (list.empty()) return {400, "an empty Transfer-Encoding field"};
    for (auto& coding : list) {
      if (lower(coding) != "chunked")
        return {501, "transfer coding '" + coding +
                         "' is not implemented: send a request body with a Content-Length "
                         "or Transfer-Encoding: chunked"};
      ++chunked;
    }
  }
  if (chunked > 1) return {400, "Transfer-Encoding names chunked more than once"};
  if (version < 11) return {400, "Transfer-Encoding in an HTTP/1.0 request"};
  if (has_length)
    return {400, "a request with both Transfer-Encoding and Content-Length (RFC 9112 6.3)"};
  return {};
}

} // namespace guestflow
