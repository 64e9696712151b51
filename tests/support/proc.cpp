#include "tests/support/proc.hpp"

#include <cerrno>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

namespace guestflow::test_support {

std::string proc_text(pid_t pid, const char* file) {
  auto path = "/proc/" + std::to_string(pid) + "/" + file;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string text;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // end, or the process went away meanwhile
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

std::vector<pid_t> pids_where(const char* file,
                              const std::function<bool(const std::string&)>& match) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    if (match(proc_text(static_cast<pid_t>(pid), file))) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

} // namespace guestflow::test_support
