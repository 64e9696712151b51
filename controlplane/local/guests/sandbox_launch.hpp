#pragma once

#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <chrono>
#include <linux/filter.h>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

/// Starting a guest's long-lived init under bubblewrap, detached from the control plane.
///
/// Process tree: the server posix_spawns A, the spawn helper (spawn_helper.hpp: the server
/// never forks); A calls setsid() and forks B, then exits, so B is reparented to init (or
/// the nearest subreaper). B joins the guest's cgroups and netns as
/// root, binds the workspace in a private mount namespace, drops to the guest uid/gid (like
/// `setpriv --reuid --regid --clear-groups`), waits until A is gone — bwrap's
/// --die-with-parent must bind to B's *final* parent, not to A — and execs bwrap. bwrap's
/// outer process is therefore the per-guest shim: not a child of the server, it survives
/// the server's restart; killing it (or the cgroup) takes the sandbox down. Inside, bwrap's
/// own pid 1 reaps every orphan, and the command — the control plane's own static init
/// (guest_init.hpp, a sealed memfd), which announces readiness and then waits — keeps the
/// sandbox alive.
///
/// Images (image_store.hpp) change the root and nothing else: a rootfs image's tree is bound
/// read-only at / instead of the host's /usr (B binds it onto a fixed mountpoint first, as
/// it does the workspace, so the guest uid need not traverse the state dir); a python-env
/// image adds read-only binds of host directories at their own paths.
namespace guestflow::local {

/// What stands between a guest and the host kernel: bwrap's namespaces (and the seccomp
/// deny-list), or gVisor's user-space kernel (gvisor_sandbox.hpp) inside the same cgroups,
/// netns and mounts.
enum class guest_isolation { namespaces, gvisor };

/// "namespaces" | "gvisor" (the wire's names). Inline: the wire and metrics code that names
/// a kind links none of the launch code.
inline const char* to_string(guest_isolation x) noexcept {
  return x == guest_isolation::gvisor ? "gvisor" : "namespaces";
}
inline std::optional<guest_isolation> isolation_from_string(std::string_view x) noexcept {
  if (x == "namespaces") return guest_isolation::namespaces;
  if (x == "gvisor") return guest_isolation::gvisor;
  return std::nullopt;
}

struct launch_request {
  guest_isolation isolation = guest_isolation::namespaces;
  std::string bwrap = "/usr/bin/bwrap";
  /// gVisor: runsc, the control plane's state dir (the guest's runsc files live in
  /// <state_dir>/gvisor/<id>), the guest id (runsc's container id), and the runsc command that
  /// makes the sandbox (`run --detach`; a restore passes its own).
  std::string runsc = "/usr/bin/runsc";
  std::string state_dir;
  std::string id;
  std::vector<std::string> gvisor_command{"run", "--detach"};
  std::string hostname;
  std::string workspace; ///< host directory bound at /workspace (when workspace_fd < 0)
  /// A detached mount (workspace_disk.hpp) the shim attaches at /workspace in its private
  /// mount namespace instead of binding `workspace`; the caller closes it after the launch.
  int workspace_fd = -1;
  uid_t uid = 60000;
  gid_t gid = 60000;
  std::vector<std::string> cgroup_procs; ///< cgroup.procs files to join before bwrap
  std::string netns_path;                ///< join this netns; empty → bwrap --unshare-net
  const std::vector<sock_filter>* seccomp = nullptr;
  /// Optional: a sealed memfd holding *seccomp, made once for every guest (each launch
  /// opens a file description of its own: bwrap reads the program from the offset).
  int seccomp_fd = -1;
  /// Host directory bound read-only at / (a rootfs image; it has the mountpoints /proc,
  /// /dev, /tmp, /workspace and the files /etc/passwd, group, hosts, resolv.conf). Empty:
  /// the host's /usr layout.
  std::string root;
  /// Host directories bound read-only at the same path in the guest (a python-env image).
  std::vector<std::string> ro_binds;
  /// Bind mounts (guest_mounts.hpp, already checked): a host directory or a directory of
  /// the workspace, each opened by the shim refusing every symlink and bound at its guest
  /// path after /workspace, read-only when asked.
  std::vector<sandbox_mount> mounts;
  /// A sealed, read-only memfd holding the guest init (guest_init.hpp); -1: the launch
  /// makes one once per process and shares it.
  int init_fd = -1;
  std::chrono::milliseconds timeout{10000};
  /// A pool's fork template (fork_template.hpp) instead of a guest's init: this command
  /// (it writes a byte to fd 3 once ready and closes it), these capabilities added in its
  /// user namespace only, and no seccomp deny-list: the guests it clones stack it themselves
  /// before anything of theirs runs. Empty: a guest's init.
  std::vector<std::string> template_command;
  std::vector<std::string> template_caps;
};

struct launched_init {
  pid_t pid = 0;           ///< host pid of the sandbox's pid 1 (namespaces, root)
  uint64_t start_time = 0; ///< /proc/<pid>/stat starttime
};

/// Starts the guest and returns once its command runs (setup finished: namespaces, root,
/// seccomp in place). The caller removes the cgroups on failure (B already joined them).
result<launched_init> launch_guest_init(const launch_request& req);

/// The bwrap argv for `req` running `command` (used by launch_guest_init, and by benches
/// to time raw bwrap with exactly the same sandbox). fd numbers are the launcher's: 3 ready
/// pipe, 4 info pipe, 5 seccomp, 6-8 /etc/passwd, group, hosts, 9 the guest init (a fork
/// template: its status pipe); the workspace is expected at /run/guestflow/workspace, an image
/// root at /run/guestflow/rootfs and the ro_binds at /run/guestflow/ro/<i> (see
/// sandbox_launch.cpp).
std::vector<std::string> bwrap_argv(const launch_request& req,
                                    const std::vector<std::string>& command);

struct process_stat {
  char state = '?'; ///< R, S, D, Z, X, …
  pid_t ppid = 0;
  uint64_t flags = 0;      ///< the kernel's PF_* flags
  uint64_t start_time = 0; ///< clock ticks after boot

  /// Dying: killed or exiting, not yet a zombie. A pid-namespace init stays in this state
  /// (as 'S') while the kernel kills and waits for the rest of its namespace.
  bool exiting() const { return (flags & 0x4) != 0; } // PF_EXITING
};

/// /proc/<pid>/stat fields 3, 4, 9 and 22; nullopt when the process is gone.
std::optional<process_stat> read_process_stat(pid_t pid);

} // namespace guestflow::local
