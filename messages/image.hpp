#pragma once

#include "messages/json.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// Guest images of the local control plane (`guestflow image`, `/v1/images`): value types
/// and their strict codecs. CreateOS has its own templates and none of these endpoints.
namespace guestflow {

/// The image every local control plane has: the host's /usr. It cannot be added, removed
/// or shadowed.
inline constexpr std::string_view builtin_image = "debian:12";

/// Image kinds as the wire names them.
inline constexpr std::string_view image_kind_builtin = "builtin";
inline constexpr std::string_view image_kind_rootfs = "rootfs";
inline constexpr std::string_view image_kind_python_env = "python-env";

/// True for a valid image name: `[a-z0-9][a-z0-9._:-]{0,63}` (so never "", ".", ".." or
/// anything with '/'; it is also the image's directory name in the state dir).
bool valid_image_name(std::string_view name) noexcept;

/// Why `name` is not a valid image name (for messages), or empty when it is.
std::string image_name_problem(std::string_view name);

/// The preload entry that means "this image's guests run flows": a pool guest's python
/// waiter then imports the runner's engine (controlplane/local/service/python_waiter.py).
/// No Python module can have this name.
inline constexpr std::string_view preload_runner = "guestflow:runner";
/// At most this many preload entries per image.
inline constexpr size_t max_preload_entries = 64;

/// Why `module` cannot be a preload entry (a dotted Python name of ASCII identifiers, at most
/// 200 characters, or `preload_runner`), or empty when it can.
std::string preload_problem(std::string_view module);

/// `modules` as an image keeps them (sorted, each once), or bad_request naming the first bad
/// entry or too many of them.
result<std::vector<std::string>> canonical_preload(std::vector<std::string> modules);

/// One image (`GET /v1/images` element, part of the `POST` answer).
struct image_info {
  std::string name;
  std::string kind;        ///< builtin | rootfs | python-env
  std::string source;      ///< the host path it was made from ("" for builtin)
  uint64_t size_bytes = 0; ///< bytes stored (rootfs) or the prefix's size (python-env)
  std::string created_at;  ///< RFC 3339 UTC ("" for builtin)
  /// Modules a warm-pool guest's python waiter imports before the guest is taken (sorted,
  /// each once; `image add --preload`, GUESTFLOW_PRELOAD for the built-in image).
  std::vector<std::string> preload;
  /// A gVisor snapshot was taken (`image add --snapshot`): gVisor creates restore it.
  bool snapshot = false;
  friend bool operator==(const image_info& a, const image_info& b) {
    return a.name == b.name && a.kind == b.kind && a.source == b.source &&
           a.size_bytes == b.size_bytes && a.created_at == b.created_at &&
           a.preload == b.preload && a.snapshot == b.snapshot;
  }
};

/// `data` of `GET /v1/images`: `{data: [image_info…], pagination: {total}}`, by name.
struct image_list {
  std::vector<image_info> data;
  uint64_t total = 0;
  friend bool operator==(const image_list& a, const image_list& b) {
    return a.data == b.data && a.total == b.total;
  }
};

/// Body of `POST /v1/images`: a name and exactly one source, an absolute host path of the
/// control plane's host (the decoder refuses anything else).
struct image_add_request {
  std::string name;
  std::optional<std::string> rootfs;     ///< a rootfs tar (plain, gz, xz, zst, bz2) or dir
  std::optional<std::string> python_env; ///< a Python environment prefix (a venv)
  std::vector<std::string> preload;      ///< see image_info::preload (checked, any order)
  /// Also boot a gVisor guest of it, import the preload and checkpoint it (a snapshot).
  bool snapshot = false;
  friend bool operator==(const image_add_request& a, const image_add_request& b) {
    return a.name == b.name && a.rootfs == b.rootfs && a.python_env == b.python_env &&
           a.preload == b.preload && a.snapshot == b.snapshot;
  }
};

/// `data` of `POST /v1/images`: the new image plus what the import left out (device nodes,
/// FIFOs and sockets; at most the first 20 paths are named, `dropped_total` counts all).
struct image_added {
  image_info image;
  std::vector<std::string> dropped;
  uint64_t dropped_total = 0;
  friend bool operator==(const image_added& a, const image_added& b) {
    return a.image == b.image && a.dropped == b.dropped && a.dropped_total == b.dropped_total;
  }
};

/// `data` of `DELETE /v1/images/{name}`.
struct image_removed {
  std::string name;
  friend bool operator==(const image_removed& a, const image_removed& b) {
    return a.name == b.name;
  }
};

/// The record of one image in the state dir (`images/<name>/image.json`), written inside
/// the import's staging directory so that it appears with the image in one rename.
struct image_manifest {
  uint32_t format = 1;
  image_info info;
  /// rootfs: the tree bound read-only at / (relative to the image directory).
  std::string root_dir;
  /// python-env: host directories bound read-only at the same path in the guest.
  std::vector<std::string> ro_binds;
  /// python-env: put first on the guest's PATH (PREFIX/bin).
  std::string path_prepend;
  friend bool operator==(const image_manifest& a, const image_manifest& b) {
    return a.format == b.format && a.info == b.info && a.root_dir == b.root_dir &&
           a.ro_binds == b.ro_binds && a.path_prepend == b.path_prepend;
  }
};

template<>
result<image_info> decode<image_info>(std::string_view, const decode_limits&);
template<>
result<image_list> decode<image_list>(std::string_view, const decode_limits&);
template<>
result<image_add_request> decode<image_add_request>(std::string_view, const decode_limits&);
template<>
result<image_added> decode<image_added>(std::string_view, const decode_limits&);
template<>
result<image_removed> decode<image_removed>(std::string_view, const decode_limits&);
template<>
result<image_manifest> decode<image_manifest>(std::string_view, const decode_limits&);

std::string encode(const image_info& x);
std::string encode(const image_list& x);
std::string encode(const image_add_request& x);
std::string encode(const image_added& x);
std::string encode(const image_removed& x);
std::string encode(const image_manifest& x);

} // namespace guestflow
