#include "apps/owner_lease.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <unistd.h>
#include <utility>

namespace guestflow::cli {

result<owner_lease> owner_lease::take(const std::string& state_dir, const std::string& owner) {
  std::error_code err;
  std::filesystem::create_directories(state_dir, err);
  auto path = (std::filesystem::path{state_dir} / ("owner-" + owner + ".lock")).string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return fail(ec::unavailable, "cannot open " + path + ": " + std::strerror(errno));
  int rc;
  while ((rc = ::flock(fd, LOCK_SH)) != 0 && errno == EINTR) {
  }
  if (rc != 0) {
    auto why = std::string{std::strerror(errno)};
    ::close(fd);
    return fail(ec::unavailable, "cannot lock " + path + ": " + why);
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

bool owner_lease::sole() {
  if (!exclusive()) return false;
  reshare();
  return true;
}

bool owner_lease::exclusive() {
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return true;
  reshare();
  return false;
}

void owner_lease::reshare() {
  while (::flock(fd_, LOCK_SH) != 0 && errno == EINTR) {
  }
}

} // namespace guestflow::cli
