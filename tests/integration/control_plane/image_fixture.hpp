#pragma once

// What the image tests share: a self-contained rootfs made from this host's binaries, tars
// of it, a venv with a marker module, and a control-plane fixture with image calls.

#include "messages/image.hpp"
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/unit/control_plane_local/tar_writer.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace guestflow::testing {

/// A root file system that runs `sh -c` on its own: usr/bin/{sh,cat,ls,touch,stat,id,
/// readlink} copied from the host with the libraries `ldd` names (usr/lib, usr/lib64 and
/// the merged-/usr symlinks bin, lib, lib64), and /marker.txt holding `marker`.
void make_tiny_rootfs(const std::filesystem::path& dir, const std::string& marker);

/// `tar -C dir -c[z]f out .` with the host's tar.
void tar_dir(const std::filesystem::path& dir, const std::filesystem::path& out, bool gzip);

/// The tree below `dir` as tar entries (directories, files with their modes, symlinks), to
/// which a test adds hostile members.
std::vector<tar_entry> entries_of(const std::filesystem::path& dir);

/// Writes `entries` as a tar at `out`.
void write_tar(const std::filesystem::path& out, const std::vector<tar_entry>& entries);

/// A venv of /usr/bin/python3 (`-m venv --without-pip`) at `dir` whose site-packages holds
/// a module `marker` printing `marker imported`; `home_dir`, when given, replaces the
/// pyvenv.cfg `home` with a base installation of our own (bin/python3 → /usr/bin/python3)
/// that bin/python3 goes through, as a pyenv venv's does.
void make_venv(const std::filesystem::path& dir, const std::filesystem::path& home_dir = {});

class image_test : public control_plane_test {
protected:
  /// POST /v1/images {"name", `field`: path}.
  http_reply add_image(const std::string& name, const std::string& field,
                       const std::filesystem::path& path);
  /// The same, asserting success.
  image_added added(const std::string& name, const std::string& field,
                    const std::filesystem::path& path);
  /// Names in GET /v1/images.
  std::vector<std::string> image_names();
  /// Entries under state_dir/images (leftovers of imports included).
  std::vector<std::string> image_dirs() const;
  /// A guest on `image` with no network.
  sandbox_created create_on(const std::string& image);
  /// POST /v1/sandboxes `body`, expected to be refused with `status` and `needle`; a guest
  /// made anyway (a failing test) is still deleted at TearDown.
  void refuse_create(const std::string& body, unsigned status, const std::string& needle);
  /// `sh -c script` in guest `id`.
  exec_result sh(const std::string& id, const std::string& script);
};

} // namespace guestflow::testing
