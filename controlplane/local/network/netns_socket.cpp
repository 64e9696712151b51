#include "controlplane/local/network/netns_socket.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

/// The process's own network namespace, opened once (by whichever thread asks first: every
/// thread is back in it whenever it is not inside socket_in_netns).
int host_netns() {
  static const int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  return fd;
}

} // namespace

result<unique_fd> open_netns_of(int pid) {
  unique_fd fd{
      ::open(("/proc/" + std::to_string(pid) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd)
    return fail(ec::unavailable, "the sandbox's network namespace cannot be opened: " +
                                     std::string{std::strerror(errno)});
  return fd;
}

result<unique_fd> socket_in_netns(int netns_fd) {
  int home = host_netns();
  if (home < 0)
    return fail(ec::unavailable, "this process's network namespace cannot be opened: " +
                                     std::string{std::strerror(errno)});
  if (::setns(netns_fd, CLONE_NEWNET) != 0)
    return fail(ec::unavailable, "entering the sandbox's network namespace failed: " +
                                     std::string{std::strerror(errno)});
  unique_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP)};
  int saved = errno;
  if (::setns(home, CLONE_NEWNET) != 0) {
    std::fprintf(stderr,
                 "guestflow: a worker thread cannot leave a sandbox's network "
                 "namespace (%s); aborting\n",
                 std::strerror(errno));
    std::abort();
  }
  if (!s)
    return fail(ec::unavailable, "a socket in the sandbox's network namespace: " +
                                     std::string{std::strerror(saved)});
  return s;
}

} // namespace guestflow::local
