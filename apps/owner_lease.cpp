#include "apps/owner_lease.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace guestflow::cli {

result<owner_lease> owner_lease::take(const std::string& state_dir, const std::string& owner,
                                      const std::function<bool()>& stop_waiting) {
  std::error_code err;
  std::filesystem::create_directories(state_dir, err);
  auto path = (std::filesystem::path{state_dir} / ("owner-" + owner + ".lock")).string();
  // Read-only is enough for flock, and 0644 lets another user of a shared state dir (same
  // owner id) take the lease too.
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail(ec::unavailable, "cannot open " + path + ": " + std::strerror(errno));
  auto pause = std::chrono::milliseconds{20};
  while (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      auto why = std::string{std::strerror(errno)};
      ::close(fd);
      return fail(ec::unavailable, "cannot lock " + path + ": " + why);
    }
    if (stop_waiting && stop_waiting()) {
      ::close(fd);
      return fail(ec::guest_failed, "stopped while a sweep held " + path);
    }
    std::this_thread::sleep_for(pause); // a sweep's list call: rarely more than a second
    pause = std::min(pause * 2, std::chrono::milliseconds{500});
  }
  return owner_lease{fd, std::move(path)};
}

owner_lease::owner_lease(owner_lease&& other) noexcept
    : fd_(std::exchange(other.fd_, -1))
    , path_(std::move(other.path_)) {}

owner_lease& owner_lease::operator=(owner_lease&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
  }
  return *this;
}

owner_lease::~owner_lease() {
  if (fd_ >= 0) ::close(fd_); // closing the last descriptor releases the lock
}

bool owner_lease::exclusive() {
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
  share(); // a failed conversion may have dropped the shared lock
  return false;
}

void owner_lease::share() {
  while (::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
  }
}

} // namespace guestflow::cli
