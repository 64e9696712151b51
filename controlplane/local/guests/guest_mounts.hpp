#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <filesystem>
#include <string>
#include <sys/types.h>
#include <vector>

/// A create's bind mounts (`sandbox_mount`): which the control plane accepts, how they are
/// kept in the record store, and the workspace directories they need before a launch.
/// A host directory is bound only when its real path (symlinks resolved) lies under one of
/// the mount roots; the spawn helper then opens that real path refusing every symlink, so a
/// directory swapped for a link between the check and the launch is refused, not followed.
namespace guestflow::local {

/// The host directories a create may bind: `GUESTFLOW_SESSION_MOUNT_ROOTS` (colon-separated)
/// and `GUESTFLOW_SESSION_SKILLS_DIR` of this process's environment, each resolved to its
/// real path (one that does not exist is left out). Read at each create and start: the
/// operator's change applies without a restart.
std::vector<std::filesystem::path> mount_roots_from_env();

/// The mounts checked and normalized for a launch, sorted by guest path: a host directory
/// resolved to its real path, which must be a directory under a root (else bad_request
/// naming the roots); a workspace directory relative, without `.`/`..` or empty parts; a
/// guest path absolute and plain (no `.`/`..`, `//` or trailing `/`), not `/`, not at or
/// under the guest's own system paths (/proc, /dev, /sys, /usr, /bin, /sbin, /lib*, /etc,
/// /tmp, /run, /workspace), and neither equal to nor nested in another mount's.
result<std::vector<sandbox_mount>>
resolve_mounts(const std::vector<sandbox_mount>& mounts,
               const std::vector<std::filesystem::path>& roots);

/// Makes every `workspace_dir` below `root_fd` (the workspace file system's root, or its
/// directory without a quota): missing parts are created 0755 and owned by the guest; a
/// part that exists must be a directory, never a symlink (the guest wrote there before).
result<bool> make_workspace_dirs(int root_fd, const std::vector<sandbox_mount>& mounts,
                                 uid_t uid, gid_t gid);

/// The record store's text of `mounts` (one line each; the decoder refused control bytes)
/// and back. An unreadable line is unavailable naming it.
std::string mounts_to_text(const std::vector<sandbox_mount>& mounts);
result<std::vector<sandbox_mount>> mounts_from_text(const std::string& text);

} // namespace guestflow::local
