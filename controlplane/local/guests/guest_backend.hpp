#pragma once

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"
#include "messages/egress.hpp"
#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

/// The local control plane's guests: a long-lived init inside bubblewrap namespaces,
/// its own cgroups, an optional netns with nftables egress rules. Plain, blocking class:
/// the HTTP server calls it from a worker thread, never from its I/O thread.
/// Guests are not children of the calling process (they outlive it); started commands are,
/// and only reap() collects them: the process must not ignore SIGCHLD, wait for arbitrary
/// children, or be a child subreaper (create() refuses then). Layout: guest_backend.cpp;
/// sandbox_launch, guest_exec, guest_files, cgroups, netns_egress, seccomp_filter.
namespace guestflow::local {

/// How an image changes a guest's root (resolved by the image store, image_store.hpp).
/// Everything else — namespaces, uid, seccomp, cgroups, /proc, /dev, private /tmp, the
/// writable /workspace, the network — is the same for every image.
struct image_layout {
  /// Non-empty: this host directory is the guest's / (read-only) instead of the host's
  /// /usr layout. It must hold the mountpoints image_import.hpp guarantees.
  std::filesystem::path root;
  /// Host directories bound read-only at the same path in the guest.
  std::vector<std::string> ro_binds;
};

/// What to build (the validated create request plus the server's choices).
struct guest_spec {
  std::string id; ///< control-plane id, also names cgroups, netns and workspace
  std::string name;
  /// namespaces (bwrap) or gvisor (runsc, gvisor_sandbox.hpp): everything else is the same.
  guest_isolation isolation = guest_isolation::namespaces;
  /// gVisor: the runsc command that makes the sandbox instead of `run --detach` (a restore
  /// from a checkpoint); empty: boot.
  std::vector<std::string> gvisor_command;
  shape shape_info; ///< resolved catalog entry (memory limit = mem_mib, workspace size =
                    ///< default_disk_mib)
  /// Files the workspace can hold; 0: one per 16 KiB of its size (ext4's default ratio).
  uint64_t workspace_inodes = 0;
  std::string rootfs; ///< "debian:12" (the host's /usr), or the name of `image`
  /// The image `rootfs` names; required for any rootfs but "debian:12".
  std::optional<image_layout> image;
  egress_policy egress;
  std::map<std::string, std::string> envs;
  /// Allocate every block of a new workspace image (a persistent guest's: its data is kept),
  /// refusing the create with `capacity` when the host cannot (workspace_disks::create_image).
  bool reserve_workspace = false;
  /// Start a stopped persistent guest: its workspace (image, or directory without a quota)
  /// exists already and is checked (`e2fsck -p`: images have no journal) and attached as it
  /// is. A failure then leaves the workspace exactly as it was.
  bool kept_workspace = false;
  /// Non-empty: the guest's directory (its workspace inside) is this one under
  /// backend_config::workspace_root (a persistent guest of a fleet) instead of
  /// state_dir/guests/<id>.
  std::filesystem::path guest_dir;
  /// Bind mounts, checked and normalized by resolve_mounts() (guest_mounts.hpp): the
  /// workspace directories are made before the launch; a host directory that became a
  /// symlink since is refused by the launch.
  std::vector<sandbox_mount> mounts;
  /// Set: starts the guest instead of launch_guest_init (a fork-server pool's clone of its
  /// template, fork_template.hpp), given the request create() built.
  std::function<result<launched_init>(const launch_request&)> launch;
};

/// Beside a shared workspace: the guest's create request and owner, so that another node
/// can take the guest over (control_plane.cpp writes it; destroy() removes it).
inline constexpr const char* shared_spec_file = "spec.json";
/// Beside it for a guest with service URLs: its ingress secret and every id it had, so that
/// the node taking it over keeps its URLs (control_plane_ingress.cpp; destroy() removes it).
inline constexpr const char* shared_ingress_file = "ingress";

/// Everything needed to find a live guest again, including after a control-plane
/// restart (persisted in the record store as JSON by the server).
struct guest_runtime {
  std::string id;
  guest_isolation isolation = guest_isolation::namespaces;
  pid_t init_pid = 0;
  uint64_t init_start_time = 0;         ///< /proc/<pid>/stat field 22: detects pid reuse
  std::vector<std::string> cgroup_dirs; ///< every cgroup directory created for the guest
  std::string netns;                    ///< netns name, empty when none
  /// Names the guest's workspace: its image is workspace_image_path(workspace) (a file
  /// system of its own, mounted only in the guest); a host directory at this path is the
  /// workspace of a guest made without a quota (backend_config::workspace_quota false).
  std::filesystem::path workspace;
  std::string ip; ///< guest address, empty without a netns
};

/// A command started inside a guest. The caller owns the fds and must call reap().
struct exec_process {
  pid_t pid = 0;
  int pidfd = -1;     ///< readable when the process exits (pidfd_open)
  int stdout_fd = -1; ///< read end, O_NONBLOCK | O_CLOEXEC
  int stderr_fd = -1;
  /// gVisor: the guest's id and netns name (runsc's flags and where its control socket is)
  /// and the exec's files (<base>.json: its process spec, <base>.pid: its pid in the
  /// sandbox), removed by reap().
  std::string gvisor_guest;
  std::string gvisor_netns;
  std::string gvisor_base;
  /// The exit watcher (spawn_helper/protocol.hpp): its pid (the server's child, reaped with
  /// the command) and the read end of its timing pipe. 0 / -1: none.
  pid_t watcher = 0;
  int timing_fd = -1;
  /// A process started before it was given its command (the python waiter): when it was
  /// given it. The command's run counts from here, not from the process's start.
  std::optional<std::chrono::steady_clock::time_point> handed_over;
  /// Set by reap(): the command's own run as its watcher measured it, off the server's
  /// clock, so a stall of the server does not count. nullopt: no watcher, or it said nothing.
  std::optional<std::chrono::nanoseconds> ran;
  /// A run a forked pool guest's init started (python_waiter.hpp): not the server's child,
  /// so reap() reads its exit status from this socket ("status N\n") instead of waitpid.
  int status_fd = -1;
};

/// Host facts the server reports in /v1/capabilities and checks at create.
struct host_support {
  bool cgroup_v2 = false;
  bool nftables = false; ///< rules (and allow-all with the host protected) can be enforced
  bool seccomp = false;
  /// runsc runs (gvisor_sandbox.hpp); else why not, naming the package.
  bool gvisor = false;
  std::string gvisor_problem;
};

struct backend_config {
  std::filesystem::path state_dir; ///< workspaces live under state_dir/guests/<id>
  /// Shared by a fleet's nodes (`--workspace-root`): persistent guests' directories
  /// (guest_spec::guest_dir) live right below it. Empty: none.
  std::filesystem::path workspace_root;
  uid_t guest_uid = 60000;
  gid_t guest_gid = 60000;
  uint32_t pids_max = 512;
  /// Host loopback ports guests must never reach. Guests reach no host address at all (see
  /// netns_egress.hpp), so every port is covered; kept for the server's capabilities.
  std::vector<uint16_t> protected_ports;
  /// Every workspace is a file system of the shape's size (workspace_disk.hpp). Off only
  /// for benches measuring what that costs: the workspace is then an unbounded host
  /// directory.
  bool workspace_quota = true;
  /// Quota images kept ready per size (GUESTFLOW_WORKSPACE_POOL, see workspace_pool_from);
  /// 0: none.
  size_t workspace_pool = 2;
  // Host tools (overridable so that tests can prove the fail-closed paths).
  std::string bwrap = "/usr/bin/bwrap";
  std::string runsc = "/usr/bin/runsc";
  std::string mke2fs = "/usr/sbin/mke2fs";
  std::string ip = "/usr/sbin/ip";
  std::string nft = "/usr/sbin/nft";
  std::string e2fsck = "/usr/sbin/e2fsck";
};

class guest_backend {
public:
  explicit guest_backend(backend_config cfg);
  ~guest_backend();

  const host_support& support() const noexcept;
  const backend_config& config() const noexcept;

  /// Builds and starts a guest; returns once its init runs. On any failure, everything
  /// created so far is removed before returning the failure.
  result<guest_runtime> create(const guest_spec& spec);

  /// True if the guest's init still runs (same pid *and* start time).
  bool alive(const guest_runtime& g) const;

  /// Starts `cmd args…` (no shell) inside the guest's namespaces, cgroups, root and uid,
  /// with the guest's envs plus PYTHONUNBUFFERED=1, cwd /workspace.
  /// `stdio_fd` (gVisor only): the command's stdin and stdout instead of /dev/null and a
  /// pipe (a service URL's relay, control_plane_ingress.cpp); the caller keeps it.
  result<exec_process> start_exec(const guest_runtime& g, const exec_request& req,
                                  const std::map<std::string, std::string>& envs,
                                  int stdio_fd = -1);

  /// SIGKILLs a started exec (client went away) — its whole process group in the guest.
  void kill_exec(const exec_process& p);

  /// Waits for (or collects) the exit status and closes the fds: exit code, or 128+signal.
  int reap(exec_process& p);

  /// Freezer: FROZEN / THAWED.
  result<bool> pause(const guest_runtime& g);
  result<bool> resume(const guest_runtime& g);

  /// Number of OOM kills the guest's memory cgroup recorded so far.
  uint64_t oom_kills(const guest_runtime& g) const;
  /// Writes the guest's workspace back and fails (`workspace_io_error: …`) when writes were
  /// lost since the last check (workspace_disk.hpp sync_workspace). A dead guest: true.
  result<bool> sync_workspace(const guest_runtime& g);

  /// Replaces the live egress rules (nftables in the guest netns). deny_all ↔ rules
  /// changes that need a netns the guest does not have are refused with bad_request.
  result<bool> set_egress(const guest_runtime& g, const egress_policy& egress);

  /// Resolves `path` (absolute, inside the guest root, no `..`, no NUL, no symlink
  /// escaping the guest) to an open fd: for reading, or for writing (parents created,
  /// file truncated, owned by the guest uid). bad_request / not_found on refusal.
  /// `room`: first as check_room(g, path, *room), through the same proven root.
  result<int> open_file(const guest_runtime& g, const std::string& path, bool for_write,
                        std::optional<uint64_t> room = std::nullopt);

  /// Room for `bytes` more at `path` (what a files-API upload may write): fine when the
  /// file system holding it (the workspace's own, or /tmp) has that much free beyond what
  /// replacing the file there frees; else artifact_too_large naming what is free. Writes
  /// nothing. The kernel enforces the limit anyway; this refuses before a byte is written.
  result<bool> check_room(const guest_runtime& g, const std::string& path, uint64_t bytes);

  /// SIGKILL everything in the cgroups → wait empty (the workspace's file system and its
  /// loop device go with the guest's last process) → rmdir cgroups → delete netns →
  /// remove workspace image (and directory). Idempotent; safe on a half-built or dead guest,
  /// and on a runtime that names only the id (recorded before create returned): then whatever
  /// create names by that id is removed.
  result<bool> destroy(const guest_runtime& g);

  /// gVisor: `runsc checkpoint` of the sandbox into `dir` (gvisor_checkpoint.hpp; in the
  /// guest's netns, where runsc's control socket is), which ends the sandbox. Then call stop()
  /// or destroy() for the rest. A failure leaves nothing at `dir`; the guest may still run.
  result<bool> checkpoint(const guest_runtime& g, const std::filesystem::path& dir);

  /// Removes the runsc state of gVisor guests `live` does not name and whose cgroups hold no
  /// process (a crash between a teardown's kill and its removal); returns how many.
  size_t remove_stray_gvisor_state(const std::set<std::string>& live);

  /// destroy() but for the workspace: every process killed, cgroups and netns removed, the
  /// workspace's file system unmounted (synchronously: a start may attach it again at once)
  /// and its image kept. Idempotent; safe on a dead guest.
  result<bool> stop(const guest_runtime& g);

private:
  /// A stopped guest's directory is there and writable (typed errors otherwise).
  result<bool> check_kept_workspace(const std::filesystem::path& guest_dir) const;
  /// The kept image is there, writable, and passes `e2fsck -p`.
  result<bool> check_image(const std::filesystem::path& image);
  /// What stop() and destroy() share: `g` filled by its id when it names nothing (a record
  /// persisted before create returned), its workspace pinned (the pin is returned: the
  /// unmount happens at its close, not in the guest's last exiting process), every process
  /// killed, cgroups and netns removed. `first`: the first failure.
  unique_fd tear_down(guest_runtime& g, std::optional<failure>& first);

  struct impl;
  impl* impl_;
};

} // namespace guestflow::local
