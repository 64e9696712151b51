#pragma once

#include <cerrno>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace guestflow::test_support {

/// The whole file at `path`, bytes as they are; "" when it cannot be read (a /proc file of a
/// process that is gone, a log not written yet), and what was read so far when a /proc
/// file's process goes away while it is read (ESRCH). POSIX reads, not a stream: libstdc++'s
/// filebuf throws on that read error whatever the stream's exception mask.
inline std::string slurp(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

} // namespace guestflow::test_support
