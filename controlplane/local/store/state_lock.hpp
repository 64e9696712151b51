#pragma once

#include "common/unique_fd.hpp"
#include "messages/error.hpp"

#include <filesystem>

namespace guestflow::local {

/// Exclusive ownership of a state dir: an flock on `state_dir/control-plane.lock`, held for
/// the process's life (the kernel drops it when the process dies, so no stale locks).
/// The lock file holds the owner's pid, for the second server's error message.
class state_lock {
public:
  static result<state_lock> acquire(const std::filesystem::path& state_dir);

private:
  explicit state_lock(unique_fd fd)
      : fd_(std::move(fd)) {}
  unique_fd fd_;
};

} // namespace guestflow::local
