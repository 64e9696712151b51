#include "controlplane/local/guests/guest_files.hpp"

#include "common/unique_fd.hpp"

#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

constexpr uint64_t in_guest = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;

/// openat2 that retries the EAGAIN the kernel returns when a concurrent rename or mount
/// might have let a lookup escape (it never lets it).
int open_in(int dirfd, const std::string& path, uint64_t flags, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = in_guest;
  for (int attempt = 0;; ++attempt) {
    long fd = ::syscall(SYS_openat2, dirfd, path.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN || attempt == 8) return int(fd);
  }
}

std::string quoted(const std::string& p) {
  return "\"" + p + "\"";
}

failure refused(const std::string& path, const std::string& why) {
  return fail(ec::bad_request, "path " + quoted(path) + " " + why);
}

/// A write into one of the guest's own tmpfs (its /tmp, /dev/shm, a root made from the host's
/// /usr): the guest's memory, which the server's bytes would be charged to the server for,
/// with nothing to bound them. Refused whether the file exists or not.
failure in_guest_memory(const std::string& path) {
  return refused(path, "is in a file system the guest keeps in its own memory (its /tmp, "
                       "/dev/shm or root); the files API writes below /workspace");
}

/// Maps an errno from resolving or opening `path` onto the wire errors.
failure path_error(const std::string& path, int err) {
  switch (err) {
  case ENOENT:
    return fail(ec::not_found, "no such file in the sandbox: " + quoted(path));
  case ENOTDIR:
    return refused(path, "has a component that is not a directory");
  case EISDIR:
    return refused(path, "is a directory, not a file");
  case ELOOP:
    return refused(path, "goes through too many symlinks or a /proc magic link");
  case EROFS:
    return refused(path, "is on a read-only part of the sandbox (/usr and the system "
                         "directories are read-only; write below /workspace)");
  case EOVERFLOW: // a create on a file system of the guest's user namespace: no id for root
    return in_guest_memory(path);
  case EXDEV:
    return refused(path, "leaves the sandbox's root");
  case ENAMETOOLONG:
    return refused(path, "is too long");
  default:
    return refused(path, std::string{"cannot be opened: "} + std::strerror(err));
  }
}

/// Only plain files on ordinary filesystems: never a device, FIFO or socket (opening one
/// as host root could block or act on a device), nothing in procfs/sysfs; a write, nothing
/// in the guest's own memory (in_guest_memory).
result<bool> check_plain_file(int fd, const std::string& path, bool for_write) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return path_error(path, errno);
  if (S_ISDIR(st.st_mode)) return path_error(path, EISDIR);
  if (!S_ISREG(st.st_mode))
    return refused(path, "is not a regular file (devices, FIFOs and sockets are refused)");
  struct statfs sfs;
  if (::fstatfs(fd, &sfs) != 0) return path_error(path, errno);
  if (sfs.f_type == PROC_SUPER_MAGIC || sfs.f_type == SYSFS_MAGIC ||
      sfs.f_type == CGROUP_SUPER_MAGIC || sfs.f_type == CGROUP2_SUPER_MAGIC ||
      sfs.f_type == DEBUGFS_MAGIC || sfs.f_type == SECURITYFS_MAGIC)
    return refused(path, "is in a kernel pseudo-filesystem (/proc, /sys), which the files "
                         "API does not serve");
  if (for_write && sfs.f_type == TMPFS_MAGIC) return in_guest_memory(path);
  return true;
}

/// Reopens an O_PATH fd for real I/O: the inode checked above is the inode opened, whatever
/// the guest renames meanwhile.
result<int> reopen(int path_fd, int flags, const std::string& path) {
  auto proc = "/proc/self/fd/" + std::to_string(path_fd);
  int fd = ::open(proc.c_str(), flags | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return path_error(path, errno);
  return fd;
}

std::string prefix_of(const std::vector<std::string>& parts, size_t n) {
  std::string p;
  for (size_t i = 0; i < n; ++i)
    p += "/" + parts[i];
  return p.empty() ? "/" : p;
}

/// Resolves (creating as needed) the parent directory of the last component.
result<unique_fd> make_parents(int root_fd, const std::vector<std::string>& parts,
                               const std::string& path, uid_t uid, gid_t gid) {
  unique_fd dir{open_in(root_fd, "/", O_PATH | O_DIRECTORY)};
  if (!dir) return path_error(path, errno);
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    const auto prefix = prefix_of(parts, i + 1);
    for (int attempt = 0;; ++attempt) {
      unique_fd next{open_in(root_fd, prefix, O_PATH | O_DIRECTORY)};
      if (next) {
        dir = std::move(next);
        break;
      }
      if (errno != ENOENT || attempt == 2)
        return attempt == 2 ? refused(path, "has a component that is a dangling symlink")
                            : path_error(path, errno);
      // The component names one entry of a directory resolved inside the guest: creating
      // it there cannot land outside.
      if (::mkdirat(dir.get(), parts[i].c_str(), 0755) == 0)
        ::fchownat(dir.get(), parts[i].c_str(), uid, gid, AT_SYMLINK_NOFOLLOW);
      else if (errno != EEXIST)
        return path_error(path, errno);
    }
  }
  return dir;
}

} // namespace

result<std::vector<std::string>> split_guest_path(const std::string& path) {
  if (path.find('\0') != std::string::npos)
    return fail(ec::bad_request, "path contains a NUL byte");
  if (path.empty() || path[0] != '/')
    return fail(ec::bad_request, "path " + quoted(path) +
                                     " is not absolute; give the full "
                                     "path inside the sandbox, e.g. /workspace/data.csv");
  if (path.size() >= PATH_MAX) return refused(path, "is too long");
  std::vector<std::string> parts;
  size_t at = 1;
  while (at <= path.size()) {
    auto slash = path.find('/', at);
    auto part = path.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    if (part == "..") return refused(path, "contains a '..' component");
    if (part == ".") return refused(path, "contains a '.' component");
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  if (parts.empty()) return refused(path, "names the root directory, not a file");
  return parts;
}

result<bool> check_guest_room(int root_fd, const std::string& path, uint64_t bytes) {
  auto parts = split_guest_path(path);
  if (!parts) return parts.error();
  // The file system that would hold the file: the deepest directory of the path that exists
  // (missing parents are created on the same one).
  unique_fd dir{open_in(root_fd, "/", O_PATH | O_DIRECTORY)};
  if (!dir) return path_error(path, errno);
  for (size_t i = 1; i < parts->size(); ++i) {
    unique_fd next{open_in(root_fd, prefix_of(*parts, i), O_PATH | O_DIRECTORY)};
    if (!next) break;
    dir = std::move(next);
  }
  struct statvfs fsinfo {};
  struct stat dir_st {};
  if (::fstatvfs(dir.get(), &fsinfo) != 0 || ::fstat(dir.get(), &dir_st) != 0)
    return path_error(path, errno);
  // Replacing a file on the same file system frees its blocks first.
  uint64_t freed = 0;
  bool exists = false;
  unique_fd old{open_in(root_fd, prefix_of(*parts, parts->size()), O_PATH)};
  struct stat old_st {};
  if (old && ::fstat(old.get(), &old_st) == 0 && S_ISREG(old_st.st_mode)) {
    exists = true;
    if (old_st.st_dev == dir_st.st_dev) freed = uint64_t(old_st.st_blocks) * 512;
  }
  const uint64_t block = fsinfo.f_bsize ? fsinfo.f_bsize : 4096;
  const uint64_t needed = (bytes + block - 1) / block * block;
  const uint64_t free_bytes = uint64_t(fsinfo.f_bavail) * fsinfo.f_frsize;
  const auto mib = [](uint64_t b) { return std::to_string(b >> 20) + " MiB"; };
  const auto size_text =
      "of " + mib(uint64_t(fsinfo.f_blocks) * fsinfo.f_frsize) +
      ((*parts)[0] == "workspace" ? " (the sandbox's disk quota for /workspace; delete files "
                                    "in the sandbox or use a shape with more disk)"
                                  : " on the file system holding it");
  if (needed > free_bytes + freed)
    return fail(ec::artifact_too_large, "path " + quoted(path) + ": " + std::to_string(bytes) +
                                            " bytes do not fit: " + std::to_string(free_bytes) +
                                            " bytes are free " + size_text);
  if (!exists && fsinfo.f_files != 0 && fsinfo.f_favail == 0)
    return fail(ec::artifact_too_large,
                "path " + quoted(path) + ": no inode is left for a new file " + size_text);
  return true;
}

result<int> open_guest_file(int root_fd, const std::string& path, bool for_write, uid_t uid,
                            gid_t gid) {
  auto parts = split_guest_path(path);
  if (!parts) return parts.error();
  const auto clean = prefix_of(*parts, parts->size());

  if (!for_write) {
    unique_fd p{open_in(root_fd, clean, O_PATH)};
    if (!p) return path_error(path, errno);
    if (auto ok = check_plain_file(p.get(), path, false); !ok) return ok.error();
    return reopen(p.get(), O_RDONLY, path);
  }

  auto parent = make_parents(root_fd, *parts, path, uid, gid);
  if (!parent) return parent.error();
  for (int attempt = 0; attempt < 3; ++attempt) {
    unique_fd p{open_in(root_fd, clean, O_PATH)};
    if (p) {
      if (auto ok = check_plain_file(p.get(), path, true); !ok) return ok.error();
      auto fd = reopen(p.get(), O_WRONLY | O_TRUNC, path);
      if (fd) [[maybe_unused]]
        int rc = ::fchown(*fd, uid, gid);
      return fd;
    }
    if (errno != ENOENT) return path_error(path, errno);
    // New file: created in the resolved parent, never through a symlink (O_EXCL fails on
    // one, and the next round follows it inside the guest instead).
    unique_fd fd{
        open_in(parent->get(), parts->back(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644)};
    if (fd) {
      [[maybe_unused]] int rc = ::fchown(fd.get(), uid, gid);
      return fd.release();
    }
    if (errno != EEXIST) return path_error(path, errno);
  }
  return refused(path, "is a dangling symlink");
}

} // namespace guestflow::local
