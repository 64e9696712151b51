#pragma once

// The tests' one temporary directory (tests/support: shared by every test binary).

#include <filesystem>
#include <string>

namespace guestflow::test_support {

/// A fresh, private (0700) directory `/tmp/<prefix>.XXXXXX`, removed with everything in it
/// at destruction. Under /tmp rather than $TMPDIR: Unix socket paths made inside it must fit
/// in sun_path (108 bytes). Throws std::runtime_error (with the OS's reason) if it cannot
/// be made.
class temp_dir {
public:
  explicit temp_dir(const std::string& prefix = "guestflow-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

} // namespace guestflow::test_support
