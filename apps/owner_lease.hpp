#pragma once

#include "messages/error.hpp"

#include <string>

namespace guestflow::cli {

/// Every live guestflow process of one owner holds this lease: a shared flock on
/// `<state dir>/owner-<owner>.lock`, for the session's life. Guest names carry the owner,
/// not the process, so a sweep of the owner's orphans cannot tell a sibling's live guests
/// from a dead process's; it may only run while no other process holds the lease. The
/// kernel drops a dead process's lock, SIGKILL included, so a crashed run never blocks the
/// sweep that cleans up after it. An owner shared across state dirs or hosts
/// (GUESTFLOW_OWNER) is beyond it.
class owner_lease {
public:
  /// Creates the state dir if needed; waits only while a sweep holds the lease alone.
  static result<owner_lease> take(const std::string& state_dir, const std::string& owner);

  owner_lease(owner_lease&& other) noexcept;
  owner_lease& operator=(owner_lease&& other) noexcept;
  owner_lease(const owner_lease&) = delete;
  owner_lease& operator=(const owner_lease&) = delete;
  ~owner_lease();

  /// True if no other process holds the lease at this moment (this one stays shared).
  bool sole();

  /// Holds the lease alone if no other process holds it, until this object ends; new
  /// sessions of the owner wait meanwhile. False (the lease staying shared) otherwise.
  bool exclusive();

  const std::string& path() const { return path_; }

private:
  owner_lease(int fd, std::string path)
      : fd_(fd)
      , path_(std::move(path)) {}
  /// flock can drop a shared lock while converting it: take it back.
  void reshare();

  int fd_ = -1;
  std::string path_;
};

} // namespace guestflow::cli
