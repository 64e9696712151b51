#pragma once

#include "controlplane/local/guests/guest_backend.hpp"

#include <linux/filter.h>
#include <map>
#include <string>
#include <vector>

/// Running a command inside a live guest.
///
/// The server posix_spawns X, the spawn helper (spawn_helper.hpp: the server never forks),
/// which joins the guest's cgroups (writes "0" to each cgroup.procs),
/// enters the net, ipc, uts, cgroup, pid and mount namespaces of the guest's init, chroots
/// to the init's root (opened as /proc/<init>/root before any setns), clears supplementary
/// groups and enters the guest's user namespace last (as host root it has every capability
/// in the guest's namespaces, but only until it enters the user namespace). X then forks Y
/// with CLONE_PARENT, so Y is the server's child (pidfd, exit status) while living in the
/// guest's pid namespace. Y starts a session (its own process group for kill_exec), drops
/// the bounding set and every capability, becomes the guest uid/gid, sets no_new_privs,
/// loads the guest's seccomp filter and execs `cmd` from the guest's PATH, cwd /workspace.
/// Before it joins anything of the guest, X forks the command's exit watcher, which stays on
/// the host and records when the command exits (spawn_helper/protocol.hpp): the command's
/// run is not the server's view of it, which a stall of the server lengthens.
namespace guestflow::local {

struct exec_setup {
  uid_t uid = 60000;
  gid_t gid = 60000;
  std::vector<std::string> cgroup_procs;
  const std::vector<sock_filter>* seccomp = nullptr;
  /// Optional: a memfd holding *seccomp, made once (the helper preads it).
  int seccomp_fd = -1;
  /// gVisor: runsc and the control plane's state dir (gvisor_sandbox.hpp).
  std::string runsc = "/usr/bin/runsc";
  std::string state_dir;
  /// gVisor, when set: the command's stdin and stdout (a service URL's relay socket, made
  /// by the caller and still theirs) instead of /dev/null and the stdout pipe.
  int stdio_fd = -1;
};

/// The PATH of a command unless the guest's envs set one (a python-env image puts its
/// PREFIX/bin in front: control_plane.cpp).
inline constexpr const char* default_guest_path =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The environment of a command: a sane PATH and HOME, the guest's envs on top, then
/// PYTHONUNBUFFERED=1 (output must reach the host before a kill).
std::vector<std::string> exec_environment(const std::map<std::string, std::string>& envs);

/// Starts the command; see the namespace comment. A command that is not found exits 127
/// (126 if not executable) with a message on stderr. Setup failures are errors.
result<exec_process> spawn_in_guest(const guest_runtime& g, const exec_request& req,
                                    const std::map<std::string, std::string>& envs,
                                    const exec_setup& setup);

/// The same in a gVisor guest: the server posix_spawns the helper, which execs
/// `runsc exec --process <spec>` (the server's child: pidfd, exit status, the command's
/// stdout and stderr on its pipes); the spec (0600, in the guest's runsc dir) carries the
/// guest uid/gid, no capabilities, no_new_privs, the environment and cwd /workspace. runsc
/// resolves `cmd` on the guest's PATH; one it cannot find exits 128 with runsc's message.
/// The helper (mode `timed`) forks an exit watcher of `runsc exec` before its exec.
result<exec_process> spawn_in_gvisor(const guest_runtime& g, const exec_request& req,
                                     const std::map<std::string, std::string>& envs,
                                     const exec_setup& setup);

/// Once the command is reaped: reaps its exit watcher and sets `p.ran` from what the watcher
/// measured (spawn_helper/protocol.hpp), from the later of the command's start and
/// `p.handed_over`; closes the timing pipe.
void reap_watcher(exec_process& p);

/// Kills a gVisor exec's command and its descendants inside the sandbox (SIGKILL of the
/// `runsc exec` process alone would leave them running).
void kill_gvisor_exec(const std::string& runsc, const std::string& state_dir,
                      const exec_process& p);

} // namespace guestflow::local
