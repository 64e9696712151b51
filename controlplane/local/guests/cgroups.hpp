#pragma once

#include "messages/error.hpp"

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <sys/types.h>
#include <vector>

/// A guest's cgroups: cgroup v1 (one directory per controller: memory, pids, freezer, cpu)
/// or v2 (one directory), detected at start. Guest directories live under a `guestflow`
/// parent: v1 /sys/fs/cgroup/<controller>/guestflow/<id>, v2 /sys/fs/cgroup/guestflow/<id>.
namespace guestflow::local {

struct cgroup_layout {
  bool v2 = false;
  std::string v2_root;                          ///< the cgroup2 mount, when v2
  std::map<std::string, std::string> v1_mounts; ///< controller → mount point, when v1
};

/// Finds the mounts; fails (ec::unavailable) when memory, pids or the freezer are missing.
result<cgroup_layout> detect_cgroups(const std::string& fs_root = "/sys/fs/cgroup");

/// detect_cgroups without asking the kernel: `fs_root` is a cgroup2 mount when `cgroup2`,
/// else the v1 hierarchies below it are read from `mountinfo` (/proc/self/mountinfo's
/// format). What lets a test lay out a fake root like either version on any host.
result<cgroup_layout> cgroup_layout_at(const std::string& fs_root, bool cgroup2,
                                       std::istream& mountinfo);

/// The directories a guest's cgroups have under `layout`, whether they exist or not (v1: one
/// per mounted controller, memory first; v2: one).
std::vector<std::string> guest_cgroup_dirs(const cgroup_layout& layout, const std::string& id);

struct cgroup_limits {
  uint64_t memory_bytes = 0;
  uint32_t pids_max = 0;
  uint32_t vcpu = 0; ///< CPU weight relative to other guests (1024 / 100 per vcpu)
};

/// Creates the guest's directories and writes the limits; removes what it created when a
/// step fails. Returns every directory created.
result<std::vector<std::string>> create_guest_cgroups(const cgroup_layout& layout,
                                                      const std::string& id,
                                                      const cgroup_limits& limits);

/// The `cgroup.procs` files a process writes "0" to in order to join the guest.
std::vector<std::string> procs_files(const std::vector<std::string>& dirs);

/// Freezes or thaws (v1 freezer.state, v2 cgroup.freeze) and waits until the kernel reports
/// the state reached.
result<bool> set_frozen(const std::vector<std::string>& dirs, bool frozen,
                        std::chrono::milliseconds timeout);

/// True while the guest's freezer reports FROZEN / frozen (or is freezing).
bool is_frozen(const std::vector<std::string>& dirs);

/// OOM kills recorded by the guest's memory cgroup (v1 memory.oom_control, v2
/// memory.events `oom_kill`).
uint64_t oom_kill_count(const std::vector<std::string>& dirs);

/// Processes (host pids) in one cgroup directory; empty when it is gone.
std::vector<pid_t> cgroup_pids(const std::string& dir);

/// SIGKILL every process (v2: cgroup.kill; v1: every member, the guest's pid-namespace init
/// among them, freezing only if members keep appearing) → wait until empty → rmdir, for
/// every directory. Missing directories are fine: idempotent.
result<bool> kill_and_remove(const std::vector<std::string>& dirs,
                             std::chrono::milliseconds timeout);

} // namespace guestflow::local
