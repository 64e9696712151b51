#pragma once

#include "messages/error.hpp"

#include <linux/filter.h>
#include <vector>

namespace guestflow::local {

/// The guests' syscall deny-list (ptrace, mount family, unshare/setns, clone with namespace
/// flags, bpf, keyctl, io_uring, perf_event_open, userfaultfd, kexec, module calls,
/// socket(AF_NETLINK|AF_PACKET), …) as a classic BPF program generated with libseccomp:
/// denied calls fail with EPERM (clone3 with ENOSYS, so libc falls back to clone, whose
/// flags the filter can see); foreign architectures and x32 numbers are refused.
/// The same program goes to bwrap (--seccomp FD) and to every exec (PR_SET_SECCOMP).
result<std::vector<sock_filter>> build_guest_seccomp();

/// A fresh memfd holding `prog`, positioned at 0, for bwrap's --seccomp (each launch gets
/// its own: bwrap reads it to EOF, so a shared file offset would race).
result<int> seccomp_memfd(const std::vector<sock_filter>& prog);

} // namespace guestflow::local
