#include "tests/support/proc.hpp"

#include "tests/support/slurp.hpp"

#include <cstdlib>
#include <dirent.h>
#include <unistd.h>

namespace guestflow::test_support {

std::vector<pid_t> pids_where(const char* file,
                              const std::function<bool(const std::string&)>& match) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    if (match(slurp(std::filesystem::path{"/proc"} / e->d_name / file)))
      out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

} // namespace guestflow::test_support
