#pragma once

#include <string>
#include <sys/resource.h>

namespace guestflow::bench {

/// Thousands of runs or streams in flight are thousands of sockets, here and in a server
/// child started afterwards (it inherits the limit): takes the hard limit. Returns
/// "before -> now (hard N)" for the bench's header.
inline std::string raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return "unknown";
  auto before = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return std::to_string(before) + " -> " + std::to_string(rl.rlim_cur) + " (hard " +
         std::to_string(rl.rlim_max) + ")";
}

} // namespace guestflow::bench
