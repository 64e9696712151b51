#include "controlplane/local/store/state_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/file.h>

namespace guestflow::local {

result<state_lock> state_lock::acquire(const std::filesystem::path& state_dir) {
  auto path = state_dir / "control-plane.lock";
  unique_fd fd{::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
  if (!fd)
    return fail(ec::unavailable, "cannot open " + path.string() + ": " + std::strerror(errno));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    auto n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
    std::string owner = n > 0 ? std::string{buf, static_cast<size_t>(n)} : "unknown";
    while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' '))
      owner.pop_back();
    return fail(ec::unavailable, "another control plane (pid " + owner +
                                     ") already serves state dir " + state_dir.string() +
                                     "; stop it or use another --state-dir");
  }
  auto pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), pid.data(), pid.size(), 0) < 0)
    return fail(ec::unavailable, "cannot write " + path.string() + ": " + std::strerror(errno));
  return state_lock{std::move(fd)};
}

} // namespace guestflow::local
