#include "controlplane/local/guests/child_setup.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::local::child {

void send(int fd, const report& r) noexcept {
  [[maybe_unused]] auto n = ::write(fd, &r, sizeof r);
}

void die(int fd, int step) noexcept {
  report r;
  r.step = step;
  r.error = errno;
  send(fd, r);
  ::_exit(127);
}

void reset_signals() noexcept {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int s = 1; s < NSIG; ++s)
    ::sigaction(s, &dfl, nullptr); // fails harmlessly for SIGKILL, SIGSTOP, reserved ones
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

bool arrange_fds(const int* fds, int n, int cloexec_from) noexcept {
  // First lift every source above the target range, so that no dup3 below clobbers a
  // source that still has to move.
  int lifted[32];
  if (n > 32) return false;
  for (int i = 0; i < n; ++i) {
    lifted[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, n);
    if (lifted[i] < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (::dup3(lifted[i], i, i >= cloexec_from ? O_CLOEXEC : 0) < 0) return false;
  return ::close_range(n, ~0U, 0) == 0;
}

int format_number(char* buf, int64_t v) noexcept {
  char tmp[24];
  int len = 0;
  bool neg = v < 0;
  uint64_t u = neg ? uint64_t(-(v + 1)) + 1 : uint64_t(v);
  do {
    tmp[len++] = char('0' + u % 10);
    u /= 10;
  } while (u != 0);
  int out = 0;
  if (neg) buf[out++] = '-';
  while (len > 0)
    buf[out++] = tmp[--len];
  return out;
}

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
