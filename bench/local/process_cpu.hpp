#pragma once

#include <optional>
#include <set>
#include <string>
#include <sys/types.h>

/// Where a control plane's CPU goes, split by process, for bench_control_plane. Every
/// figure is a cumulative count of CPU seconds; the bench takes differences between the
/// edges of a measured window.
namespace guestflow::bench {

/// utime+stime and cutime+cstime of one process (/proc/<pid>/stat fields 14-17), seconds.
struct proc_times {
  double self_s = 0;     ///< the process's own threads
  double children_s = 0; ///< children it has reaped (with their own reaped descendants)
};
std::optional<proc_times> read_proc_times(pid_t pid);

/// The CPU of `pid`'s children so far: those it reaped (its cutime+cstime) plus those still
/// alive (each one's own and reaped). A helper alive at both edges of a window counts by
/// its own delta; one that ends inside it moves from the second term to the first.
double children_cpu_s(pid_t pid);

/// The guests' CPU as cgroups account it: the `guestflow` parent directory the control
/// plane puts every guest under (controlplane/local/guests/cgroups.cpp) — cgroup v2
/// `cpu.stat` usage_usec, or cgroup v1 `cpuacct.usage` where cpuacct shares a hierarchy
/// the guests join. Host-wide: any other control plane's guests count too, and so do the
/// exec'd commands and their setup helpers, which join the guest's cgroups (they are also
/// in the control plane's children). `why_not` says why when it is unreadable.
std::optional<double> guest_cgroup_cpu_s(std::string* why_not);

/// Guests are not the control plane's children: a guest's shim is orphaned on purpose
/// (sandbox_launch.hpp) and goes to the nearest subreaper. Making this process that
/// subreaper — before it starts any control plane — makes every guest's process tree
/// end as a child here, and wait4 hands over its whole CPU (the shim, bwrap, the guest's
/// init and everything they reaped): the guests of this bench only, nobody else's.
class orphan_reaper {
public:
  orphan_reaper(); ///< PR_SET_CHILD_SUBREAPER; throws when the kernel refuses
  /// Reaps every exited child except `keep` (this bench's own: the control planes, whose
  /// harness waits for them) and adds the reaped CPU. Stops at the first kept one.
  void drain(const std::set<pid_t>& keep);
  double reaped_cpu_s() const { return cpu_s_; }
  size_t reaped() const { return count_; }

private:
  double cpu_s_ = 0;
  size_t count_ = 0;
};

} // namespace guestflow::bench
