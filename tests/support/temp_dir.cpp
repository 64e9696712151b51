#include "tests/support/temp_dir.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <stdlib.h>
#include <vector>

namespace guestflow::test_support {

temp_dir::temp_dir(const std::string& prefix) {
  auto pattern = "/tmp/" + prefix + ".XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
  path_ = buf.data();
}

temp_dir::~temp_dir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

} // namespace guestflow::test_support
