#pragma once

#include <linux/filter.h>
#include <string>
#include <vector>

/// The floor under a guest: the same bubblewrap sandbox the local backend builds
/// (controlplane/local/guests/sandbox_launch.hpp's bwrap_argv: the same namespaces, root,
/// /etc, seccomp program and workspace bind), started straight from this process as the
/// guest uid — no control plane, no cgroups, no records, no HTTP.
namespace guestflow::bench {

class raw_sandbox {
public:
  /// Makes a workspace of the guest uid's own under /tmp (bound at /workspace; a
  /// directory the guest uid can reach, which a 0700 test directory is not).
  raw_sandbox();
  ~raw_sandbox(); ///< removes the workspace
  raw_sandbox(const raw_sandbox&) = delete;
  raw_sandbox& operator=(const raw_sandbox&) = delete;

  /// Runs `command` in a fresh sandbox and waits for it, its stdout and stderr read to the
  /// end. Throws std::runtime_error unless it exits 0 having printed exactly `expected`.
  /// Thread-safe: the bench runs one per client thread at once.
  void run(const std::vector<std::string>& command, const std::string& expected) const;

  /// The argv this floor runs for `command` (for the bench's header).
  std::vector<std::string> argv_for(const std::vector<std::string>& command) const;

private:
  std::string workspace_;
  std::vector<sock_filter> seccomp_;
  std::string passwd_, group_, hosts_;
};

} // namespace guestflow::bench
