#pragma once

// Driving Beast's request parser the way the servers do, synchronously: the same read
// algorithms (http::read_header, http::read) over a stream that hands out the fuzz input in
// drawn short reads, as a TCP peer would.

#include "tests/fuzz/fuzz_support.hpp"

#include <algorithm>
#include <boost/asio/buffer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstring>
#include <string_view>

namespace guestflow::fuzz {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

/// A SyncReadStream over fixed bytes: short reads of drawn sizes, then EOF.
class chunked_stream {
public:
  chunked_stream(std::string_view bytes, draws& d)
      : rest_(bytes)
      , d_(d) {}

  template<class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::system::error_code& ec) {
    ec = {};
    if (rest_.empty()) {
      ec = net::error::eof;
      return 0;
    }
    size_t room = net::buffer_size(buffers);
    size_t n = std::min({room, rest_.size(), 1 + d_.below(d_.below(2) ? 8 : 1024)});
    size_t copied = net::buffer_copy(buffers, net::buffer(rest_.data(), n));
    rest_.remove_prefix(copied);
    return copied;
  }

  template<class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::system::error_code ec;
    auto n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error{ec};
    return n;
  }

  size_t left() const { return rest_.size(); }

private:
  std::string_view rest_;
  draws& d_;
};

/// Beast 1.74 speaks boost::string_view.
inline std::string_view sv(beast::string_view s) {
  return {s.data(), s.size()};
}

/// What the servers read from any parsed header, touched so the sanitizers see each access.
template<class Request>
void touch_header(const Request& req) {
  volatile size_t n = 0;
  n = n + sv(req.method_string()).size() + sv(req.target()).size() + req.version();
  n = n + sv(req[http::field::authorization]).size() + sv(req[http::field::expect]).size();
  n = n + sv(req["X-Api-Key"]).size() + (req.keep_alive() ? 1 : 0);
  for (auto& f : req)
    n = n + sv(f.name_string()).size() + sv(f.value()).size();
}

} // namespace guestflow::fuzz
