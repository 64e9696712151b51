#pragma once

#include "common/unique_fd.hpp"
#include "messages/error.hpp"

#include <optional>
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
  /// Creates the state dir if needed and takes the lease shared; nullopt while a sweep
  /// holds it alone (try again: wait_turn).
  static std::optional<result<owner_lease>> try_take(const std::string& state_dir,
                                                     const std::string& owner);

  /// Holds the lease alone if no other process holds it; new sessions of the owner wait
  /// meanwhile. False (the lease staying shared) otherwise.
  bool exclusive();

  /// Shares the lease again after exclusive().
  void share();

  const std::string& path() const { return path_; }

  /// The lease file of `owner` under `state_dir` (what path() is once taken).
  static std::string path_for(const std::string& state_dir, const std::string& owner);

  /// Why a sweep deletes nothing while another process of `owner` is live (it holds the
  /// lease at `lease_path`, or the embedded state dir beside it).
  static failure owner_busy(const std::string& owner, const std::string& lease_path);

private:
  owner_lease(unique_fd fd, std::string path)
      : fd_(std::move(fd))
      , path_(std::move(path)) {}

  unique_fd fd_; ///< closing it releases the lock
  std::string path_;
};

} // namespace guestflow::cli
