#pragma once

#include <string>
#include <sys/resource.h>

namespace guestflow {

/// Thousands of guests, runs or streams in flight are thousands of descriptors (sockets,
/// pidfds, output pipes), and 1,024 would cap a server near a few hundred: takes the hard
/// limit, as servers do (a child started afterwards inherits it). Returns
/// "before -> now (hard N)" for a bench's header.
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

} // namespace guestflow
