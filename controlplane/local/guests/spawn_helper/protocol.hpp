#pragma once

// What the control plane and its spawn helper (helper.cpp) agree on: the helper's modes,
// the descriptor numbers it inherits, and the step numbers it reports on its status pipe.
// Freestanding: included by the helper, which has no libc.
#include <stdint.h>

namespace guestflow::local::spawn {

/// One message on the status pipe (the layout of child::report). Nothing arrives when the
/// final execve succeeds (the close-on-exec pipe just closes).
struct report {
  int32_t step = 0;  ///< 0 = a value report (a pid), else the failed step
  int32_t error = 0; ///< errno of the failed step
  int64_t value = 0;
};

/// `launch`: the guest's shim (sandbox_launch.cpp). Descriptors 0 … status are bwrap's
/// own layout (sandbox_launch.hpp); after them come the netns (when there is one), the
/// cgroup.procs files and the workspace's detached mount (when it has its own file system).
namespace launch {
enum step : int32_t {
  step_setsid = 1,
  step_fork_shim,
  step_cgroup,
  step_netns,
  step_mountns,
  step_workspace,
  step_image_root,
  step_ro_bind,
  step_setgroups,
  step_setgid,
  step_setuid,
  step_subreaper,
  step_fds,
  step_exec,
};
} // namespace launch

/// `exec`: a command in a live guest (guest_exec.cpp).
namespace exec {
constexpr int fd_status = 3, fd_seccomp = 4, fd_root = 5, fd_userns = 6, fd_ns_first = 7;
/// The namespaces at fd_ns_first + i, entered in this order (the user namespace last:
/// entering it first would leave the helper without the capabilities the other setns calls
/// need in their owning namespace). The cgroup.procs files follow them.
constexpr int ns_count = 6;
constexpr int fd_cgroups_first = fd_ns_first + ns_count;

enum step : int32_t {
  step_cgroup = 1,
  step_setns_first, // + index of the namespace
  step_chroot = step_setns_first + ns_count,
  step_setgroups,
  step_userns,
  step_clone,
  step_setsid,
  step_setgid,
  step_setuid,
  step_caps,
  step_chdir,
  step_nnp,
  step_fds,
  step_seccomp,
};
} // namespace exec

/// `command`: a host program, optionally in a network namespace (host_command.cpp).
namespace command {
constexpr int fd_status = 3, fd_netns = 4;
enum step : int32_t { step_setns = 1, step_sysctl, step_fds, step_exec };
} // namespace command

} // namespace guestflow::local::spawn
