#pragma once

#include "messages/error.hpp"

#include <string>
#include <sys/types.h>
#include <vector>

/// The files API inside a guest. The server runs as host root, so every path is resolved by
/// the kernel relative to the guest's root directory (/proc/<init>/root) with openat2
/// RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS: `..` and symlinks (absolute or relative) stay
/// inside the guest, /proc/<pid>/fd-style magic links are refused.
namespace guestflow::local {

/// Checks a wire path and splits it into components: absolute, no NUL, no `.` or `..`
/// component, not the root itself, at most PATH_MAX bytes. Refusals are ec::bad_request.
result<std::vector<std::string>> split_guest_path(const std::string& path);

/// Opens `path` below `root_fd` (an O_PATH fd of the guest's root).
/// Reading: a regular file (not in procfs/sysfs, no device/FIFO/socket), O_RDONLY.
/// Writing: parent directories created (owned by uid/gid), the file created or truncated
/// and owned by uid/gid; a read-only mount is refused with a clear message.
/// Missing file → ec::not_found; refusals → ec::bad_request. Returns an O_CLOEXEC fd.
result<int> open_guest_file(int root_fd, const std::string& path, bool for_write, uid_t uid,
                            gid_t gid);

/// Refuses (ec::artifact_too_large) writing `bytes` to `path` below `root_fd` when the file
/// system that would hold it lacks the room: free blocks plus those the replaced file frees,
/// and a free inode for a new file. Writes nothing; creates nothing.
result<bool> check_guest_room(int root_fd, const std::string& path, uint64_t bytes);

} // namespace guestflow::local
