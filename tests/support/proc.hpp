#pragma once

#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace guestflow::test_support {

/// Every process but this one whose /proc/<pid>/<file> (read with `slurp`: "" for a process
/// that is gone, even mid-read) satisfies `match`.
std::vector<pid_t> pids_where(const char* file,
                              const std::function<bool(const std::string&)>& match);

} // namespace guestflow::test_support
