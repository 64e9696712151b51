#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "messages/error.hpp"
#include "messages/image.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

/// The local control plane's guest images, kept in its state dir:
///
///     <state>/images/<name>/image.json   the record (messages/image.hpp image_manifest)
///     <state>/images/<name>/rootfs/      a rootfs image's tree (bound read-only at /)
///     <state>/images/.staging-<rand>/    an import in progress
///     <state>/images/.trash-<rand>/      an image being removed
///
/// An import builds everything, record included, in a staging directory and renames it
/// into place at the end (refusing to replace anything), so an image exists completely or
/// not at all: a failure removes the staging directory, and leftovers of a crash are
/// removed when the store opens. A removal renames the image away before deleting it.
/// `debian:12` (the host's /usr) is built in: never stored, added, removed or shadowed.
/// Thread-safe; add() blocks for as long as the import takes (call it off I/O threads).
namespace guestflow::local {

/// What a create needs from an image.
struct resolved_image {
  std::string name;
  std::optional<image_layout> layout; ///< nullopt: debian:12, the host's /usr
  std::string path_prepend;           ///< first on the guest's PATH ("" none)
  /// What a warm-pool guest's python waiter imports before the take (sorted, each once):
  /// the image's `preload`, for debian:12 GUESTFLOW_PRELOAD. Part of the pool key.
  std::vector<std::string> preload;
};

class image_store {
public:
  /// Opens (creating) `state_dir/images`. Records that cannot be read are skipped and
  /// described in `problems`, never fatal. `builtin_preload` is debian:12's preload, as
  /// GUESTFLOW_PRELOAD gives it (builtin_preload_from_env); an entry that is no module name
  /// is dropped and described in `problems`.
  static result<std::unique_ptr<image_store>>
  open(const std::filesystem::path& state_dir, std::vector<std::string>& problems,
       const std::vector<std::string>& builtin_preload = builtin_preload_from_env());

  /// GUESTFLOW_PRELOAD of this process's environment, split at commas (blanks around
  /// entries ignored; unset or blank: none).
  static std::vector<std::string> builtin_preload_from_env();

  /// Where the image's gVisor snapshot lives (gvisor_checkpoint.hpp): in the image's own
  /// directory, so that removing the image removes it. Empty for debian:12.
  std::filesystem::path snapshot_dir(const std::string& name) const {
    return name == builtin_image ? std::filesystem::path{} : dir_ / name / "snapshot";
  }

  /// Every image, debian:12 first, then by name.
  image_list list() const;
  /// Their names in the same order (for /v1/capabilities).
  std::vector<std::string> names() const;
  /// `rootfs` (absent → debian:12) as a create needs it; bad_request naming every image
  /// when there is no such image.
  result<resolved_image> resolve(const std::optional<std::string>& rootfs) const;

  /// Imports an image (see image_import.hpp, python_env.hpp). bad_request for a bad or
  /// taken name (debian:12 included) and for bad sources; nothing is left on failure.
  result<image_added> add(const image_add_request& req);

  /// Takes the image out of the store (renamed away at once: a create can no longer name
  /// it) and returns where its files now are, for purge(). not_found for an unknown name,
  /// bad_request for debian:12. The caller checks that no live guest uses it first.
  result<std::filesystem::path> detach(const std::string& name);
  /// Deletes what detach() returned (slow for a big image; no lock held).
  void purge(const std::filesystem::path& detached);

private:
  explicit image_store(std::filesystem::path dir)
      : dir_(std::move(dir)) {}

  result<image_manifest> build(const image_add_request& req, std::vector<std::string> preload,
                               const std::filesystem::path& staging, image_added& out);

  std::filesystem::path dir_;
  mutable std::mutex mu_;
  std::map<std::string, image_manifest> images_;
  std::set<std::string> importing_; ///< names an add() is working on
  std::vector<std::string> builtin_preload_;
};

} // namespace guestflow::local
