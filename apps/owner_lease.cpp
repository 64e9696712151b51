#include "apps/owner_lease.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <utility>

namespace guestflow::cli {

std::optional<result<owner_lease>> owner_lease::try_take(const std::string& state_dir,
                                                         const std::string& owner) {
  std::error_code err;
  std::filesystem::create_directories(state_dir, err);
  auto path = path_for(state_dir, owner);
  // Read-only is enough for flock, and 0644 lets another user of a shared state dir (same
  // owner id) take the lease too.
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0644)};
  if (!fd)
    return result<owner_lease>{
        fail(ec::unavailable, "cannot open " + path + ": " + std::strerror(errno))};
  if (::flock(fd.get(), LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK || errno == EINTR) return std::nullopt;
    return result<owner_lease>{
        fail(ec::unavailable, "cannot lock " + path + ": " + std::strerror(errno))};
  }
  return result<owner_lease>{owner_lease{std::move(fd), std::move(path)}};
}

std::string owner_lease::path_for(const std::string& state_dir, const std::string& owner) {
  return (std::filesystem::path{state_dir} / ("owner-" + owner + ".lock")).string();
}

failure owner_lease::owner_busy(const std::string& owner, const std::string& lease_path) {
  return fail(ec::unavailable, "another guestflow process of owner " + owner +
                                   " is running (it holds " + lease_path +
                                   "): its guests are live, not orphans; nothing was "
                                   "deleted. Reap once it has ended.");
}

bool owner_lease::exclusive() {
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) == 0) return true;
  share(); // a failed conversion may have dropped the shared lock
  return false;
}

void owner_lease::share() {
  while (::flock(fd_.get(), LOCK_SH) != 0 && errno == EINTR) {
  }
}

} // namespace guestflow::cli
