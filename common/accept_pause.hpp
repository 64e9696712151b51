#pragma once

#include <boost/system/error_code.hpp>
#include <cerrno>
#include <chrono>

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

} // namespace guestflow
