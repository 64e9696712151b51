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
/// thread is back in it whenever it is not inside in_netns).
int host_netns() {
  static const int fd = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  return fd;
}

/// Runs `step` with the calling thread inside `netns_fd`, then returns it home: `step`'s
/// errno (0 when it succeeded) or the failure to enter.
template<typename F>
result<int> in_netns(int netns_fd, F&& step) {
  int home = host_netns();
  if (home < 0)
    return fail(ec::unavailable, "this process's network namespace cannot be opened: " +
                                     std::string{std::strerror(errno)});
  if (::setns(netns_fd, CLONE_NEWNET) != 0)
    return fail(ec::unavailable, "entering the sandbox's network namespace failed: " +
                                     std::string{std::strerror(errno)});
  int saved = step() ? 0 : errno;
  if (::setns(home, CLONE_NEWNET) != 0) {
    std::fprintf(stderr,
                 "guestflow: a worker thread cannot leave a sandbox's network "
                 "namespace (%s); aborting\n",
                 std::strerror(errno));
    std::abort();
  }
  return saved;
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
  unique_fd s;
  auto err = in_netns(netns_fd, [&] {
    s.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP));
    return bool(s);
  });
  if (!err) return err.error();
  if (*err != 0)
    return fail(ec::unavailable, "a socket in the sandbox's network namespace: " +
                                     std::string{std::strerror(*err)});
  return s;
}

result<bool> set_child_tcp_hash(int netns_fd, unsigned buckets) {
  const auto value = std::to_string(buckets);
  // /proc/sys/net shows the namespace of whoever opens it: opened from inside.
  auto err = in_netns(netns_fd, [&] {
    unique_fd f{::open("/proc/sys/net/ipv4/tcp_child_ehash_entries", O_WRONLY | O_CLOEXEC)};
    return f && ::write(f.get(), value.data(), value.size()) == ssize_t(value.size());
  });
  if (!err) return err.error();
  if (*err != 0)
    return fail(ec::unavailable, "setting tcp_child_ehash_entries in a network namespace: " +
                                     std::string{std::strerror(*err)});
  return true;
}

} // namespace guestflow::local
