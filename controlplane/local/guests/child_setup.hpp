#pragma once

#include "messages/error.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

/// The code that runs between fork() and execve() in a multithreaded server may only make
/// async-signal-safe calls: everything it needs (paths, argv, envp, fds) is prepared before
/// the fork, and a failed step is reported through a close-on-exec pipe instead of a log.
namespace guestflow::local::child {

/// One message on a child's status pipe. Nothing arrives when the final execve succeeds
/// (the pipe just closes), so "EOF without a failure" means "the program runs".
struct report {
  int32_t step = 0;  ///< the caller's step number; 0 = a value report, not a failure
  int32_t error = 0; ///< errno of the failed step
  int64_t value = 0; ///< payload of a value report (a pid)
};

/// Writes one report (a single write below PIPE_BUF: atomic).
void send(int fd, const report& r) noexcept;

/// Reports `step` with the current errno and exits 127. Never returns.
[[noreturn]] void die(int fd, int step) noexcept;

/// Unblocks every signal and restores default dispositions: a server that ignores SIGPIPE
/// or blocks signals in its threads must not hand that to a guest.
void reset_signals() noexcept;

/// Makes `fds[i]` descriptor `i` for every i < n (close-on-exec from index `cloexec_from`
/// on) and closes every other descriptor.
bool arrange_fds(const int* fds, int n, int cloexec_from) noexcept;

/// Writes a decimal number into `buf` (no allocation); returns the length.
int format_number(char* buf, int64_t v) noexcept;

/// Reads the reports of a child's status pipe until EOF; fails with ec::unavailable when
/// the deadline passes first.
result<std::vector<report>> collect(int fd, std::chrono::steady_clock::time_point deadline);

/// waitpid() that retries on EINTR; returns the raw status or -1.
int wait_for(pid_t pid) noexcept;

/// Shell-style exit code of a wait status: the code, or 128 + signal.
int exit_code_of(int status) noexcept;

} // namespace guestflow::local::child
