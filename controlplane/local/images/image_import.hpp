#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

/// Importing a rootfs image (a tar, compressed or not, or a directory) into a directory of
/// the control plane's state dir, under one policy for hostile input. Blocking; the image
/// store (image_store.hpp) calls it on a worker thread, into a staging directory it removes
/// on failure, so that a refused or failed import leaves nothing behind.
///
/// The policy, per case (bridge-independent; README.md in this folder says the same):
/// - absolute member paths ("/etc/x") are sanitised: the leading '/' is dropped, so they
///   land inside the image (GNU tar does the same); "./" prefixes and empty or "."
///   components are dropped too;
/// - a ".." component in a member path, or in a hard link's target, is refused (the whole
///   import fails with bad_request naming the member);
/// - a member whose path goes through a symlink the archive made earlier ("lnk/x" with
///   lnk → /etc) is refused: nothing is ever written through a symlink;
/// - device nodes (character, block), FIFOs and sockets are dropped and listed in the
///   answer: the guest gets bwrap's own minimal /dev;
/// - hard links are kept when their target is an earlier regular file of the same import;
///   a link to anything else (a directory, a symlink, a missing or escaping path) is refused;
/// - symlinks are kept verbatim: they are resolved by the guest's kernel inside the guest's
///   root, where neither an absolute target nor ".." can leave it; the host never follows
///   them (the import opens every path component with O_NOFOLLOW, the mountpoints below are
///   never symlinks, and the files API resolves inside the guest's root);
/// - modes are normalised: directories 0755, files 0755 when any execute bit was set, else
///   0644 — so setuid, setgid and sticky bits are stripped and every file is readable by the
///   guest's uid; everything is owned by root (read-only in the guest anyway);
/// - the mountpoints the guest's sandbox needs are made to exist as real directories
///   (proc, dev, tmp, workspace, etc) and files (etc/passwd, etc/group, etc/hosts,
///   etc/resolv.conf), replacing a symlink or file in their place; the guest sees the
///   control plane's own passwd, group and hosts there (its uid must resolve);
/// - a directory source is read the same way (symlinks copied as symlinks, never followed;
///   hard links kept; other file systems mounted inside it skipped and listed);
/// - other tar member types (GNU sparse, multi-volume, unknown) are refused.
namespace guestflow::local {

struct import_report {
  uint64_t size_bytes = 0;          ///< bytes of file content stored
  std::vector<std::string> dropped; ///< the first 20 members left out, with why
  uint64_t dropped_total = 0;
};

/// Imports `source` (a tar — plain, gzip, xz, zstd or bzip2, recognised by magic bytes and
/// read in-process by libarchive (archive_reader.hpp) — or a directory) into `dest`, which
/// must be an empty directory. bad_request for hostile or malformed input (see above) and
/// for a source that is neither; unavailable when the disk fails. On failure `dest` holds a
/// partial tree that the caller removes.
result<import_report> import_rootfs(const std::filesystem::path& source,
                                    const std::filesystem::path& dest);

/// The directories and files every image root has (see the policy above), relative.
const std::vector<std::string>& image_mount_dirs();
const std::vector<std::string>& image_mount_files();

} // namespace guestflow::local
