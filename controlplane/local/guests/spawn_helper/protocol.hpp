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

/// The exit watcher of `exec` and `timed`: a process the helper forks (CLONE_PARENT: the
/// server's child, reaped with the command) before it joins anything of a guest, so it stays
/// on the host, outside the guest's cgroups and namespaces, and runs on while the server is
/// stalled. It waits for the command's exit (a pidfd) and writes when the command started and
/// when it exited (CLOCK_MONOTONIC, ns) to the timing pipe: the program's own run, which a
/// stall of the server before or after the exit does not lengthen. The timing pipe carries
/// reports: {step_watcher, 0, pid} from the helper once the watcher runs, then the watcher's
/// {step_started, 0, ns} and {step_exited, 0, ns} in one write. No watcher (a failed fork):
/// no reports, and the server measures the run itself.
namespace timing {
enum step : int32_t { step_watcher = 1, step_started, step_exited };
} // namespace timing

/// `exec`: a command in a live guest (guest_exec.cpp). The timing pipe's write end follows
/// the cgroup.procs files.
namespace exec {
/// fd_init: a pidfd of the guest's init. The helper enters its namespaces through it, all
/// but the user namespace in one setns (net, ipc, uts, cgroup, pid, mnt), the user namespace
/// last (entering it first would leave the helper without the capabilities the other
/// namespaces need in their owning one). The cgroup.procs files follow it.
constexpr int fd_status = 3, fd_seccomp = 4, fd_root = 5, fd_init = 6;
constexpr int fd_cgroups_first = fd_init + 1;

enum step : int32_t {
  step_cgroup = 1,
  step_setns,
  step_chroot,
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
/// `timed FD_TIMING` + `command`'s arguments: the same with an exit watcher of the program
/// writing to descriptor FD_TIMING (a gVisor exec's `runsc exec`: guest_exec.cpp).
namespace command {
constexpr int fd_status = 3, fd_netns = 4;
enum step : int32_t { step_setns = 1, step_sysctl, step_fds, step_exec };
} // namespace command

} // namespace guestflow::local::spawn
