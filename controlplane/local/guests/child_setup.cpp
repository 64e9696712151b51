#include "controlplane/local/guests/child_setup.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::local::child {

result<std::vector<report>> collect(int fd, std::chrono::steady_clock::time_point deadline) {
  std::vector<report> out;
  report r;
  size_t have = 0;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, left.count() > 0 ? int(left.count()) : 0);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return fail(ec::unavailable, std::string{"poll: "} + std::strerror(errno));
    if (rc == 0) {
      if (left.count() <= 0)
        return fail(ec::unavailable, "a helper process did not finish its setup in time");
      continue;
    }
    auto n = ::read(fd, reinterpret_cast<char*>(&r) + have, sizeof r - have);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return out;
    have += size_t(n);
    if (have == sizeof r) {
      out.push_back(r);
      have = 0;
    }
  }
}

int wait_for(pid_t pid) noexcept {
  int status = 0;
  for (;;) {
    pid_t rc = ::waitpid(pid, &status, __WALL);
    if (rc == pid) return status;
    if (rc < 0 && errno == EINTR) continue;
    return -1;
  }
}

int exit_code_of(int status) noexcept {
  if (status < 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

} // namespace guestflow::local::child
