#pragma once

#include "controlplane/local/guests/host_command.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

/// gVisor guests (isolation "gvisor"): the same guest — cgroups, netns with nft rules
/// outside, workspace file system, uid, root — with gVisor's user-space kernel (Debian's
/// `runsc`, `--platform=ptrace`) between the guest and the host kernel.
///
/// The spawn helper starts `runsc run --detach` exactly where it starts bwrap: in a shim that
/// joined the guest's cgroups (runsc's own cgroup handling is off, so sandbox, gofer and
/// ptrace stubs all live in the guest's cgroups: limits, freezer and kill as for bwrap) and
/// netns (`--network=sandbox`: gVisor's netstack takes over the netns's eth0 and its
/// address, and the guest's rules also hold on the host side of its veth,
/// netns_egress.hpp's apply_host_side_rules; `--network=none` for a guest without
/// network), in a private mount namespace holding the
/// workspace and image mounts the OCI bundle names. Per guest, node-local:
/// `<state_dir>/gvisor/<id>/` holds `bundle/config.json`, runsc's `--root` dir `state/`, and
/// `sandbox.pid`; the container id is the guest id. Execs are `runsc exec --process` (the
/// server's children, streamed like bwrap's); the files API goes through the gofer's root
/// (/proc/<gofer>/root: the container's tree as the gofer serves it, /workspace included).
namespace guestflow::local {

/// The Debian package that provides runsc (named by every `unavailable`).
inline constexpr const char* runsc_package = "runsc";

/// Where a gVisor guest's runsc files live.
struct gvisor_paths {
  std::filesystem::path dir;      ///< <state_dir>/gvisor/<id>, 0700
  std::filesystem::path bundle;   ///< dir/bundle (config.json inside)
  std::filesystem::path state;    ///< dir/state: runsc --root
  std::filesystem::path pid_file; ///< dir/sandbox.pid: the sandbox's host pid
  std::filesystem::path root;     ///< dir/rootfs: the skeleton root (host /usr layout)
  std::filesystem::path etc;      ///< dir/etc: the guest's passwd, group, hosts
  std::string container;          ///< runsc's container id: the guest id
};

gvisor_paths gvisor_paths_for(const std::filesystem::path& state_dir, const std::string& id);

/// runsc and its global flags for this guest (the same for every call on it).
std::vector<std::string> gvisor_global_args(const std::string& runsc, const gvisor_paths& p,
                                            bool networked);

/// The argv the shim runs for a runsc command that makes a sandbox (run, restore):
/// `argv` itself, or for a networked guest wrapped so runsc accepts the guest's netns
/// (/proc/sys/net hidden from it).
std::vector<std::string> gvisor_launch_argv(std::vector<std::string> argv, bool networked);

/// Runs `runsc <global args> <args…>` on a live guest and waits for it. `netns` (the
/// guest's netns name, empty without one): runsc's control socket is an abstract unix
/// socket of the network namespace the sandbox runs in, so every runsc command on a
/// networked guest runs there too.
result<command_output> run_runsc(const std::string& runsc, const gvisor_paths& p,
                                 const std::string& netns, const std::vector<std::string>& args,
                                 std::chrono::milliseconds timeout = std::chrono::seconds(10));

/// runsc is there and runs (`runsc --version`): else unavailable naming the package.
result<bool> check_runsc(const std::string& runsc);

/// Where the OCI spec finds what the shim attached (sandbox_launch.cpp's mountpoints).
struct gvisor_mount {
  std::string source, destination;
  bool read_only = false;
  bool file = false;
};

struct gvisor_spec_input {
  std::string root; ///< the bundle's root directory (read-only)
  std::string hostname;
  uid_t uid = 60000;
  gid_t gid = 60000;
  std::string init;                 ///< the container's init, a path in the guest
  std::string netns;                ///< the guest's netns (its path), empty: none
  std::vector<gvisor_mount> mounts; ///< after proc, dev, tmp, in this order
};

/// The OCI runtime spec (config.json) for `in`.
std::string gvisor_oci_spec(const gvisor_spec_input& in);

/// The process spec `runsc exec --process` reads: uid/gid, no capabilities, no_new_privs,
/// cwd /workspace.
std::string gvisor_process_spec(uid_t uid, gid_t gid, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env);

/// A guest's skeleton root with the host's /usr layout (the merged-/usr symlinks and the
/// mountpoints of the bundle, `dirs` included), read-only for the guest.
result<bool> make_gvisor_root(const std::filesystem::path& root,
                              const std::vector<std::string>& dirs);

/// The guest init (guest_init.hpp) as a file the bundle binds in, made once.
result<std::filesystem::path> gvisor_init_file(const std::filesystem::path& state_dir);

/// The guest init's path inside a gVisor guest (bound into its private /dev).
inline constexpr const char* gvisor_init_path = "/dev/.guestflow-init";

/// The gofer among the guest's processes (its root is the guest's file tree).
std::optional<pid_t> gvisor_gofer(const std::vector<std::string>& cgroup_dirs);

/// SIGKILLs the sandbox process `pid` (runsc's pid numbering) and every descendant, leaves
/// first (runsc ps / runsc kill: no process groups across the runsc interface).
void gvisor_kill_tree(const std::string& runsc, const gvisor_paths& p, const std::string& netns,
                      pid_t pid);

/// Removes the guest's runsc directory (its processes are gone). Idempotent.
result<bool> remove_gvisor_state(const std::filesystem::path& state_dir, const std::string& id);

} // namespace guestflow::local
