#pragma once

#include <boost/system/error_code.hpp>
#include <cerrno>
#include <chrono>
#include <utility>

namespace guestflow {

/// How long an acceptor waits before its next accept after a failed one. Out of
/// descriptors or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) lasts until something
/// closes: accepting again at once would spin the I/O thread, starving the connections it
/// already serves. Any other failure (ECONNABORTED: a client gave up in the queue) is one
/// connection's, and the next accept goes at once.
inline std::chrono::milliseconds accept_pause(const boost::system::error_code& err) {
  if (err.category() != boost::system::system_category()) return std::chrono::milliseconds{0};
  switch (err.value()) {
  case EMFILE:
  case ENFILE:
  case ENOBUFS:
  case ENOMEM:
    return std::chrono::milliseconds{50};
  default:
    return std::chrono::milliseconds{0};
  }
}

/// After an accept completed, takes the connections already queued behind it (at most
/// `limit`, to stay fair to the connections this thread serves) with non-blocking accepts
/// on `a`, handing each to `serve`. One accept per completion leaves a burst of connects
/// waiting behind every connection's I/O on the thread: at 10,000 streams the listen queue
/// overflowed, clients' handshakes were dropped and retried, and some ended reset. A
/// failure (nothing queued, out of descriptors) ends the batch; the next asynchronous
/// accept reports it. `make_socket()` makes the socket to accept into.
template<class Acceptor, class MakeSocket, class Serve>
void accept_queued(Acceptor& a, MakeSocket make_socket, Serve serve, int limit = 256) {
  for (int more = 0; more < limit; ++more) {
    auto next = make_socket();
    boost::system::error_code none_left;
    a.accept(next, none_left);
    if (none_left) return;
    serve(std::move(next));
  }
}

} // namespace guestflow
