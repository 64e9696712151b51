#pragma once

#include "messages/error.hpp"

#include <functional>
#include <string>

namespace guestflow::cli {

/// Every live guestflow process of one owner holds this lease: a shared flock on
/// `<state dir>/owner-<owner>.lock`, for the session's life. Guest names carry the owner,
/// not the process, so a sweep of the owner's orphans cannot tell a sibling's live guests
/// from a dead process's; it may only run while no other process holds the lease, and it
/// holds the lease alone until it has listed. The kernel drops a dead process's lock,
/// SIGKILL included, so a crashed run never blocks the sweep that cleans up after it. An
/// owner shared across state dirs or hosts (GUESTFLOW_OWNER) is beyond it.
class owner_lease {
public:
  /// Creates the state dir if needed. Waits (polling) while a sweep holds the lease alone,
  /// unless `stop_waiting` says to give up (a user's Ctrl-C).
  static result<owner_lease> take(const std::string& state_dir, const std::string& owner,
                                  const std::function<bool()>& stop_waiting);

  owner_lease(owner_lease&& other) noexcept;
  owner_lease& operator=(owner_lease&& other) noexcept;
  owner_lease(const owner_lease&) = delete;
  owner_lease& operator=(const owner_lease&) = delete;
  ~owner_lease();

  /// Holds the lease alone if no other process holds it; new sessions of the owner wait
  /// meanwhile. False (the lease staying shared) otherwise.
  bool exclusive();

  /// Shares the lease again after exclusive().
  void share();

  const std::string& path() const { return path_; }

private:
  owner_lease(int fd, std::string path)
      : fd_(fd)
      , path_(std::move(path)) {}

  int fd_ = -1;
  std::string path_;
};

} // namespace guestflow::cli
