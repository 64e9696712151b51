#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace guestflow::test_support {

/// The whole file at `path`, bytes as they are; "" when it cannot be read (a /proc file of a
/// process that is gone, a log not written yet).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in{path, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, {}};
}

} // namespace guestflow::test_support
