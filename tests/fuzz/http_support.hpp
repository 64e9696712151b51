#pragma once

// Driving the servers' own request readers (bridge/server/connection.hpp's request_reader,
// controlplane/local/http/request_reader.hpp) over Beast's test stream: the fuzz input is
// what a TCP peer sent, handed out in short reads of a drawn size, then EOF.

#include "tests/fuzz/fuzz_support.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/beast/_experimental/test/stream.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <string_view>

namespace guestflow::fuzz {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;

/// A peer that sent `bytes` and closed its side: the stream the reader reads.
struct peer {
  explicit peer(std::string_view bytes) {
    stream.append({bytes.data(), bytes.size()});
    stream.close_remote();
  }

  /// Sizes of the reads to come: mostly small, so that boundaries land inside every token.
  void cut(draws& d) { stream.read_size(1 + d.below(d.below(2) ? 8 : 1024)); }

  /// Runs the reader's operation to its handler (the test stream completes at once).
  void run() {
    ioc.restart();
    ioc.run();
  }

  net::io_context ioc;
  beast::test::stream stream{ioc};
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

/// The room a body's read left: no more than a header needs, or the pipelined bytes.
template<class Buffer>
bool room_given_back(const Buffer& buf) {
  return buf.capacity() <= 4096 || buf.capacity() == buf.size();
}

} // namespace guestflow::fuzz
