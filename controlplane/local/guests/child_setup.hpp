#pragma once

#include "messages/error.hpp"

#include <chrono>
#include <cstdint>
#include <sys/types.h>
#include <vector>

/// The server's side of its helper processes (spawn_helper.hpp): a failed step arrives as a
/// report on a close-on-exec status pipe instead of a log, and the helper is reaped.
namespace guestflow::local::child {

/// One message on a helper's status pipe (spawn_helper/protocol.hpp's spawn::report).
/// Nothing arrives when the final execve succeeds (the pipe just closes), so "EOF without
/// a failure" means "the program runs".
struct report {
  int32_t step = 0;  ///< the caller's step number; 0 = a value report, not a failure
  int32_t error = 0; ///< errno of the failed step
  int64_t value = 0; ///< payload of a value report (a pid)
};

/// Reads the reports of a child's status pipe until EOF; fails with ec::unavailable when
/// the deadline passes first.
result<std::vector<report>> collect(int fd, std::chrono::steady_clock::time_point deadline);

/// waitpid() that retries on EINTR; returns the raw status or -1.
int wait_for(pid_t pid) noexcept;

/// Shell-style exit code of a wait status: the code, or 128 + signal.
int exit_code_of(int status) noexcept;

} // namespace guestflow::local::child
