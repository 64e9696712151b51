#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

namespace guestflow::test_support {

/// Every descriptor number below a lowered soft limit taken, so that this process's next
/// open, dup or socket fails with EMFILE; restored on destruction. Descriptors already open
/// stay usable.
class fds_exhausted {
public:
  fds_exhausted() {
    ::getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    low.rlim_cur = 256;
    ::setrlimit(RLIMIT_NOFILE, &low);
    for (;;) {
      int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (fd < 0) break;
      fillers_.push_back(fd);
    }
  }
  ~fds_exhausted() {
    for (int fd : fillers_)
      ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &saved_);
  }
  fds_exhausted(const fds_exhausted&) = delete;
  fds_exhausted& operator=(const fds_exhausted&) = delete;

private:
  rlimit saved_{};
  std::vector<int> fillers_;
};

} // namespace guestflow::test_support
