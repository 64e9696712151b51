#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace guestflow {

/// Whether a request's framing can be trusted (RFC 9112 §6.1, §6.3). Beast frames a
/// request by its Content-Length whenever `chunked` is not the one final coding, and a
/// request with an unknown coding and no length as having no body: a proxy that reads the
/// same bytes the other way (smuggling) would then see a different request. Both servers
/// refuse such a request before anything else and close the connection.
struct framing_verdict {
  unsigned status = 0; ///< 0: acceptable; else 400 (faulty framing) or 501 (unknown coding)
  std::string reason;  ///< why, for the answer's message
};

/// `codings`: the values of the request's Transfer-Encoding fields (none when it has none);
/// `has_length`: it has a Content-Length field too; `version`: 10 or 11.
framing_verdict check_framing(const std::vector<std::string_view>& codings, bool has_length,
                              unsigned version);

/// The same for a parsed request: a template so that this layer names no Beast type
/// (`Request` is a beast::http::request).
template<class Request>
framing_verdict check_framing(const Request& req) {
  std::vector<std::string_view> codings;
  for (auto [at, end] = req.equal_range("Transfer-Encoding"); at != end; ++at)
    codings.emplace_back(at->value().data(), at->value().size());
  return check_framing(codings, req.count("Content-Length") > 0, req.version());
}

} // namespace guestflow
