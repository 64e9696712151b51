#pragma once

#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace guestflow::test_support {

/// The text of /proc/<pid>/<file>; "" when the process is gone, also when it goes while it
/// is being read (ESRCH). Read with POSIX calls: libstdc++'s filebuf throws on that read
/// error whatever the stream's exception mask, which failed scans racing an exit.
std::string proc_text(pid_t pid, const char* file);

/// Every process but this one whose /proc/<pid>/<file> satisfies `match`.
std::vector<pid_t> pids_where(const char* file,
                              const std::function<bool(const std::string&)>& match);

} // namespace guestflow::test_support
