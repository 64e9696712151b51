#pragma once

#include "messages/component.hpp"
#include "messages/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

/// Returned files (the component surface's): the guest tars /workspace/artifacts, the
/// host fetches the archive with a cap that binds during the transfer, and this plain tar
/// reader unpacks it in memory. Everything in the archive is untrusted guest output.
namespace guestflow::artifacts {

struct archive_limits {
  size_t max_members = 100'000;            ///< headers of any kind
  size_t max_meta_bytes = size_t{1} << 20; ///< one pax / GNU long-name record
};

/// Unpacks a tar archive held in memory: ustar (name + prefix), pax extended headers
/// (`path`, `linkpath`, `size`; global headers are validated and ignored) and GNU long
/// names ('L'/'K'). Regular files become rows with their path byte-exact (leading "./"
/// removed, nothing else: no trimming, no splitting on anything but the archive's own
/// structure: names with edge whitespace survive); directories are implied by the paths.
/// Dropped and reported with the reason: members whose path is absolute or has a ".."
/// component, symbolic and hard links, devices, fifos, sparse and unknown member types. A later
/// member with the same path replaces the earlier one, as extraction would. Fails
/// (guest_failed, with the offset) on a bad header checksum, a malformed numeric or pax field,
/// a member that runs past the end, a missing end-of-archive marker (a truncated archive), or
/// more than the limits allow. Never reads outside `archive`.
result<returned_files> unpack(std::string_view archive, const archive_limits& limits = {});

/// The reason `path` (relative to the artifacts directory) may not be written under a
/// directory — empty when it may: absolute, a ".." component, an empty path, a NUL byte.
std::string unsafe_path_reason(std::string_view path);

/// Writes `files` under `dir` (created with its parents if missing), creating the
/// parents of each file inside it. Refuses to write outside `dir`: unsafe paths are
/// refused, and every component is opened relative to its parent without following
/// symbolic links, so a link already in `dir` cannot redirect a write. Returns how many
/// files were written; bad_request naming the file on the first one that cannot be.
result<size_t> write_under(const std::string& dir, const std::vector<returned_file>& files);

} // namespace guestflow::artifacts
