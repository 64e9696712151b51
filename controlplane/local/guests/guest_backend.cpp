#include "controlplane/local/guests/guest_backend.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/guests/guest_files.hpp"
#include "controlplane/local/guests/guest_init.hpp"
#include "controlplane/local/guests/guest_mounts.hpp"
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "controlplane/local/guests/gvisor_sandbox.hpp"
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"
#include "controlplane/local/guests/seccomp_filter.hpp"
#include "controlplane/local/guests/spawn_helper.hpp"
#include "controlplane/local/guests/workspace_disk.hpp"
#include "controlplane/local/network/netns_egress.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr auto teardown_timeout = std::chrono::seconds(10);
constexpr auto freezer_timeout = std::chrono::seconds(5);

/// Ids name cgroups, a netns, an interface's record and a directory: keep them boring.
result<bool> check_id(const std::string& id) {
  if (id.empty() || id.size() > 64 || id[0] == '-')
    return fail(ec::bad_request, "guest id must be 1-64 characters and not start with '-'");
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'))
      return fail(ec::bad_request, "guest id may only contain [A-Za-z0-9_-]");
  return true;
}

/// A record read back from the store must only ever point at this guest's own resources:
/// destroy() kills and deletes whatever it names.
/// `ws` is `root/<one name>/workspace`.
bool under_root(const fs::path& ws, const fs::path& root) {
  if (root.empty()) return false;
  auto dir = ws.lexically_normal().parent_path();
  return ws.filename() == "workspace" && dir.parent_path() == root.lexically_normal() &&
         !dir.filename().empty() && dir.filename() != "." && dir.filename() != "..";
}

result<bool> check_owned(const guest_runtime& g, const fs::path& state_dir,
                         const fs::path& workspace_root) {
  if (auto ok = check_id(g.id); !ok) return ok;
  for (const auto& d : g.cgroup_dirs)
    if (d.size() < g.id.size() + 11 ||
        d.compare(d.size() - g.id.size() - 11, std::string::npos, "/guestflow/" + g.id) != 0)
      return fail(ec::bad_request, "guest record names a foreign cgroup: " + d);
  if (!g.netns.empty() && g.netns != netns_name(g.id))
    return fail(ec::bad_request, "guest record names a foreign netns: " + g.netns);
  if (!g.workspace.empty() &&
      g.workspace.lexically_normal() !=
          (state_dir / "guests" / g.id / "workspace").lexically_normal() &&
      !under_root(g.workspace, workspace_root))
    return fail(ec::bad_request,
                "guest record names a foreign workspace: " + g.workspace.string());
  return true;
}

failure unusable(const std::string& what, const failure& why) {
  return fail(why.code, what + ": " + why.message);
}

/// A forked pool guest's run (exec_process::status_fd): its init's "status N [T]" line
/// (T: when it reaped the run, monotonic ns, into `ended`), read within a deadline (the run
/// has ended when this is called, or was killed); -1 when the init is gone or says nothing
/// (a dead guest).
int read_init_status(int fd, uint64_t& ended) {
  const auto deadline = std::chrono::steady_clock::now() + teardown_timeout;
  std::string got;
  char buf[64];
  while (got.find('\n') == std::string::npos && got.size() < 256) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, int(left.count())) < 0 && errno != EINTR) return -1;
    auto n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return -1;
    got.append(buf, size_t(n));
  }
  // Lines before it (the run's own start notice) are skipped.
  auto at = got.rfind("status ");
  if (at == std::string::npos) return -1;
  char* end = nullptr;
  int code = int(std::strtol(got.c_str() + at + 7, &end, 10));
  ended = std::strtoull(end, nullptr, 10);
  return code;
}

} // namespace

struct guest_backend::impl {
  backend_config cfg;
  host_support support;
  result<cgroup_layout> layout{fail(ec::unavailable, "cgroups not detected")};
  result<std::vector<sock_filter>> seccomp{fail(ec::unavailable, "seccomp not built")};
  net_tools tools;
  std::mutex host_net_mu;
  bool host_net_ready = false;
  std::mutex init_mu;
  std::optional<result<unique_fd>> init; ///< the sealed guest init, made on first use
  /// The seccomp program as a sealed memfd, made once: launches reopen it, execs pread it.
  result<unique_fd> seccomp_fd{fail(ec::unavailable, "seccomp not built")};
  std::optional<workspace_disks> disks; ///< when cfg.workspace_quota
  mount_releaser releaser; ///< unmounts deleted guests' workspaces off the delete's path

  /// The guest init's descriptor (made once, shared by every image guest).
  result<int> init_fd() {
    std::lock_guard<std::mutex> lock{init_mu};
    if (!init) init.emplace(sealed_memfd("guestflow-init", guest_init_image()));
    if (!*init) return init->error();
    return (*init)->get();
  }

  /// The host table is applied once per backend; every guest's own table also rejects the
  /// addresses the host had when its rules were written, so a firewall reload that drops
  /// the host table does not open the host to running guests.
  result<bool> ensure_host_net() {
    std::lock_guard<std::mutex> lock{host_net_mu};
    if (host_net_ready) return true;
    auto ok = ensure_host_egress(tools);
    host_net_ready = bool(ok);
    return ok;
  }

  /// An O_PATH handle on the guest's root, proven to be the recorded init's (a gVisor
  /// guest's: its gofer's, the container's tree as the gofer serves it to the sandbox).
  result<unique_fd> guest_root(const guest_runtime& g) const {
    pid_t holder = g.init_pid;
    if (g.isolation == guest_isolation::gvisor) {
      auto gofer = gvisor_gofer(g.cgroup_dirs);
      if (!gofer) return fail(ec::guest_failed, "the sandbox's gofer is not running");
      holder = *gofer;
    }
    unique_fd root{::open(("/proc/" + std::to_string(holder) + "/root").c_str(),
                          O_PATH | O_DIRECTORY | O_CLOEXEC)};
    auto st = read_process_stat(g.init_pid);
    if (!root || !st || st->start_time != g.init_start_time || st->state == 'Z')
      return fail(ec::guest_failed, "the sandbox's init is not running");
    return root;
  }
};

guest_backend::guest_backend(backend_config cfg)
    : impl_(new impl) {
  impl_->cfg = std::move(cfg);
  impl_->tools.ip = impl_->cfg.ip;
  impl_->tools.nft = impl_->cfg.nft;
  impl_->layout = detect_cgroups();
  impl_->seccomp = build_guest_seccomp();
  if (impl_->seccomp) {
    const auto& prog = *impl_->seccomp;
    impl_->seccomp_fd =
        sealed_memfd("guestflow-seccomp", {reinterpret_cast<const char*>(prog.data()),
                                           prog.size() * sizeof(sock_filter)});
  }
  impl_->support.cgroup_v2 = impl_->layout && impl_->layout->v2;
  impl_->support.seccomp = bool(impl_->seccomp);
  impl_->support.nftables = egress_rules_supported(impl_->tools);
  // GUESTFLOW_RUNSC: another runsc (tests prove the refusal with a missing one).
  if (const char* runsc = std::getenv("GUESTFLOW_RUNSC"); runsc && *runsc)
    impl_->cfg.runsc = runsc;
  if (auto ok = check_runsc(impl_->cfg.runsc); ok)
    impl_->support.gvisor = true;
  else
    impl_->support.gvisor_problem = ok.error().message;
  if (impl_->cfg.workspace_quota)
    impl_->disks.emplace(impl_->cfg.state_dir / "disk-templates", impl_->cfg.mke2fs,
                         impl_->cfg.workspace_pool);
}

guest_backend::~guest_backend() {
  delete impl_;
}

const host_support& guest_backend::support() const noexcept {
  return impl_->support;
}

const backend_config& guest_backend::config() const noexcept {
  return impl_->cfg;
}

result<guest_runtime> guest_backend::create(const guest_spec& spec) {
  auto& cfg = impl_->cfg;
  if (auto ok = check_id(spec.id); !ok) return ok.error();
  if (spec.rootfs != "debian:12" && !spec.image)
    return fail(ec::bad_request, "rootfs \"" + spec.rootfs +
                                     "\" is not available here; the local control plane "
                                     "offers \"debian:12\" (the host's /usr) and the images "
                                     "added with `guestflow image add`");
  if (spec.image)
    for (const auto& b : spec.image->ro_binds)
      if (b.empty() || b.front() != '/')
        return fail(ec::bad_request, "image bind \"" + b + "\" is not an absolute path");
  if (spec.shape_info.mem_mib == 0)
    return fail(ec::bad_request, "shape " + spec.shape_info.id + " has no memory size");
  if (cfg.workspace_quota && spec.shape_info.default_disk_mib == 0)
    return fail(ec::bad_request, "shape " + spec.shape_info.id + " has no disk size");
  if (!impl_->layout) return unusable("cgroups", impl_->layout.error());
  if (!impl_->seccomp) return unusable("seccomp", impl_->seccomp.error());
  if (spec.isolation == guest_isolation::gvisor && !impl_->support.gvisor)
    return fail(ec::unavailable, impl_->support.gvisor_problem);
  const bool networked = spec.egress.mode != egress_policy::kind::deny_all;
  if (networked) {
    if (auto ok = check_enforceable(spec.egress); !ok) return ok.error();
    if (!impl_->support.nftables)
      return fail(ec::unavailable,
                  "egress rules cannot be enforced on this host (nftables unavailable); the "
                  "sandbox would run with an open network, so it is refused — use egress "
                  "[\"240.0.0.0/4\"] (no network) or install nftables");
  }
  const auto hostname = spec.name.empty() ? spec.id : spec.name;
  if (hostname.size() > 64)
    return fail(ec::bad_request, "guest name is too long for a hostname (max 64)");

  if (!spec.guest_dir.empty() && !under_root(spec.guest_dir / "workspace", cfg.workspace_root))
    return fail(ec::bad_request, "guest directory " + spec.guest_dir.string() +
                                     " is not right below the workspace root");
  const auto guest_dir =
      spec.guest_dir.empty() ? cfg.state_dir / "guests" / spec.id : spec.guest_dir;
  if (spec.kept_workspace) {
    if (auto ok = check_kept_workspace(guest_dir); !ok) return ok.error();
  } else {
    std::error_code ec_;
    fs::create_directories(cfg.state_dir / "guests", ec_);
    if (::mkdir(guest_dir.c_str(), 0700) != 0)
      return fail(errno == EEXIST ? ec::bad_request : ec::unavailable,
                  "cannot create " + guest_dir.string() + ": " + std::strerror(errno));
  }

  guest_runtime rt;
  rt.id = spec.id;
  rt.isolation = spec.isolation;
  rt.workspace = guest_dir / "workspace";
  // A kept workspace outlives a failed start: only what this start built goes.
  auto undo = [&](failure f) -> failure {
    if (spec.kept_workspace)
      stop(rt);
    else
      destroy(rt);
    return f;
  };
  // The workspace: a file system of the shape's size, mounted detached and attached by the
  // shim in the guest's mount namespace only (workspace_disk.hpp); held open here until the
  // launch is over.
  unique_fd workspace_mount;
  if (impl_->disks) {
    workspace_quota quota;
    quota.mib = spec.shape_info.default_disk_mib;
    quota.inodes = spec.workspace_inodes ? spec.workspace_inodes : quota.mib * 64;
    const auto image = workspace_image_path(rt.workspace);
    if (spec.kept_workspace) {
      if (auto ok = check_image(image); !ok) return undo(ok.error());
    } else if (auto ok = impl_->disks->create_image(image, quota, cfg.guest_uid, cfg.guest_gid,
                                                    spec.reserve_workspace);
               !ok) {
      return undo(unusable("workspace", ok.error()));
    }
    auto mnt =
        workspace_disks::mount_detached(image, spec.reserve_workspace || spec.kept_workspace);
    if (!mnt) return undo(unusable("workspace", mnt.error()));
    workspace_mount = std::move(*mnt);
  } else if (spec.kept_workspace) {
    if (!fs::is_directory(rt.workspace))
      return undo(fail(ec::not_found, "the kept workspace " + rt.workspace.string() +
                                          " is gone; delete the sandbox"));
  } else if (::mkdir(rt.workspace.c_str(), 0755) != 0 ||
             ::chown(rt.workspace.c_str(), cfg.guest_uid, cfg.guest_gid) != 0) {
    return undo(fail(ec::unavailable, "cannot create the workspace " + rt.workspace.string() +
                                          ": " + std::strerror(errno)));
  }

  if (!spec.mounts.empty()) {
    unique_fd own_dir;
    if (!workspace_mount)
      own_dir.reset(
          ::open(rt.workspace.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    int root = workspace_mount ? workspace_mount.get() : own_dir.get();
    if (root < 0)
      return undo(fail(ec::unavailable, "cannot open the workspace " + rt.workspace.string() +
                                            ": " + std::strerror(errno)));
    if (auto ok = make_workspace_dirs(root, spec.mounts, cfg.guest_uid, cfg.guest_gid); !ok)
      return undo(ok.error());
  }

  cgroup_limits limits;
  limits.memory_bytes = spec.shape_info.mem_mib << 20;
  limits.pids_max = cfg.pids_max;
  limits.vcpu = spec.shape_info.vcpu;
  auto dirs = create_guest_cgroups(*impl_->layout, spec.id, limits);
  if (!dirs) return undo(unusable("cgroups", dirs.error()));
  rt.cgroup_dirs = *dirs;

  launch_request req;
  req.isolation = spec.isolation;
  req.bwrap = cfg.bwrap;
  req.runsc = cfg.runsc;
  req.state_dir = cfg.state_dir.string();
  req.id = spec.id;
  if (!spec.gvisor_command.empty()) req.gvisor_command = spec.gvisor_command;
  req.hostname = hostname;
  req.uid = cfg.guest_uid;
  req.gid = cfg.guest_gid;
  req.cgroup_procs = procs_files(rt.cgroup_dirs);
  req.seccomp = &*impl_->seccomp;
  if (impl_->seccomp_fd) req.seccomp_fd = impl_->seccomp_fd->get();
  if (networked) {
    if (auto ok = impl_->ensure_host_net(); !ok)
      return undo(unusable("host network", ok.error()));
    rt.netns = netns_name(spec.id); // recorded first: a half-built netns is removed too
    // gVisor's netstack bypasses the netns's hooks: its rules also go on the host side.
    auto net = create_guest_net(impl_->tools, spec.id, spec.egress,
                                spec.isolation == guest_isolation::gvisor);
    if (!net) return undo(unusable("guest network", net.error()));
    rt.ip = net->guest_ip;
    req.netns_path = netns_path(net->netns);
  }
  req.workspace = rt.workspace.string();
  req.workspace_fd = workspace_mount.get();
  req.mounts = spec.mounts;
  if (spec.image) {
    req.ro_binds = spec.image->ro_binds;
    if (!spec.image->root.empty()) {
      auto fd = impl_->init_fd();
      if (!fd) return undo(unusable("guest init", fd.error()));
      req.root = spec.image->root.string();
      req.init_fd = *fd;
    }
  }
  auto init = spec.launch ? spec.launch(req) : launch_guest_init(req);
  if (!init) return undo(init.error());
  rt.init_pid = init->pid;
  rt.init_start_time = init->start_time;
  return rt;
}

bool guest_backend::alive(const guest_runtime& g) const {
  if (g.init_pid <= 0) return false;
  auto st = read_process_stat(g.init_pid);
  return st && st->start_time == g.init_start_time && st->state != 'Z' && st->state != 'X' &&
         !st->exiting();
}

result<exec_process> guest_backend::start_exec(const guest_runtime& g, const exec_request& req,
                                               const std::map<std::string, std::string>& envs,
                                               int stdio_fd) {
  if (!alive(g)) return fail(ec::guest_failed, "the sandbox's init is not running");
  if (is_frozen(g.cgroup_dirs)) return fail(ec::paused, "sandbox is paused");
  if (!impl_->seccomp) return unusable("seccomp", impl_->seccomp.error());
  exec_setup setup;
  setup.uid = impl_->cfg.guest_uid;
  setup.gid = impl_->cfg.guest_gid;
  setup.cgroup_procs = procs_files(g.cgroup_dirs);
  setup.seccomp = &*impl_->seccomp;
  if (impl_->seccomp_fd) setup.seccomp_fd = impl_->seccomp_fd->get();
  if (g.isolation == guest_isolation::gvisor) {
    setup.runsc = impl_->cfg.runsc;
    setup.state_dir = impl_->cfg.state_dir.string();
    setup.stdio_fd = stdio_fd;
    return spawn_in_gvisor(g, req, envs, setup);
  }
  return spawn_in_guest(g, req, envs, setup);
}

void guest_backend::kill_exec(const exec_process& p) {
  if (p.pid <= 0) return;
  ::kill(-p.pid, SIGKILL); // the session/process group the command leads
  if (p.pidfd >= 0) ::syscall(SYS_pidfd_send_signal, p.pidfd, SIGKILL, nullptr, 0);
  if (!p.gvisor_guest.empty())
    kill_gvisor_exec(impl_->cfg.runsc, impl_->cfg.state_dir.string(), p);
}

int guest_backend::reap(exec_process& p) {
  int code = -1;
  if (p.status_fd >= 0) {
    uint64_t ended = 0;
    code = read_init_status(p.status_fd, ended);
    ::close(p.status_fd);
    p.status_fd = -1;
    const std::chrono::nanoseconds end{ended};
    if (p.handed_over && ended > 0 && end >= p.handed_over->time_since_epoch())
      p.ran = end - p.handed_over->time_since_epoch();
  } else if (p.pid > 0) {
    code = child::exit_code_of(child::wait_for(p.pid));
  }
  reap_watcher(p); // the command's own run, as measured off the server's clock
  for (int* fd : {&p.pidfd, &p.stdout_fd, &p.stderr_fd}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  p.pid = 0;
  if (!p.gvisor_base.empty())
    for (const char* suffix : {".json", ".pid"})
      ::unlink((p.gvisor_base + suffix).c_str());
  return code;
}

result<bool> guest_backend::sync_workspace(const guest_runtime& g) {
  if (!impl_->disks) return true;
  auto root = impl_->guest_root(g);
  if (!root) return true; // no guest, no mount: nothing left to write back
  return local::sync_workspace(root->get());
}

result<bool> guest_backend::pause(const guest_runtime& g) {
  return set_frozen(g.cgroup_dirs, true, freezer_timeout);
}

result<bool> guest_backend::resume(const guest_runtime& g) {
  return set_frozen(g.cgroup_dirs, false, freezer_timeout);
}

uint64_t guest_backend::oom_kills(const guest_runtime& g) const {
  return oom_kill_count(g.cgroup_dirs);
}

result<bool> guest_backend::set_egress(const guest_runtime& g, const egress_policy& egress) {
  if (auto ok = check_enforceable(egress); !ok) return ok;
  if (g.netns.empty()) {
    if (egress.mode == egress_policy::kind::deny_all)
      return true; // already has no network at all
    return fail(ec::bad_request,
                "this sandbox was created with egress [\"240.0.0.0/4\"] (no network at all); "
                "its egress cannot be widened — create a new sandbox with the egress you need");
  }
  if (!impl_->support.nftables)
    return fail(ec::unavailable, "nftables is unavailable; egress rules cannot be changed");
  if (g.isolation == guest_isolation::gvisor)
    if (auto ok = apply_host_side_rules(impl_->tools, g.id, g.ip, egress); !ok) return ok;
  return apply_guest_rules(impl_->tools, g.netns, egress);
}

result<int> guest_backend::open_file(const guest_runtime& g, const std::string& path,
                                     bool for_write, std::optional<uint64_t> room) {
  auto parts = split_guest_path(path);
  if (!parts) return parts.error();
  // The gofer serves the root and /workspace; a gVisor guest's /tmp is a tmpfs of its
  // user-space kernel, which no host path reaches (the skeleton's /tmp would be written
  // instead, where the guest never looks).
  if (g.isolation == guest_isolation::gvisor && !parts->empty() && parts->front() == "tmp")
    return fail(ec::bad_request, "path \"" + path +
                                     "\": a gVisor guest's /tmp is in its own kernel's memory, "
                                     "which the files API does not reach; the files API "
                                     "writes below /workspace");
  auto root = impl_->guest_root(g);
  if (!root) return root.error();
  if (room)
    if (auto fits = check_guest_room(root->get(), path, *room); !fits) return fits.error();
  return open_guest_file(root->get(), path, for_write, impl_->cfg.guest_uid,
                         impl_->cfg.guest_gid);
}

result<bool> guest_backend::check_room(const guest_runtime& g, const std::string& path,
                                       uint64_t bytes) {
  if (auto parts = split_guest_path(path); !parts) return parts.error();
  auto root = impl_->guest_root(g);
  if (!root) return root.error();
  return check_guest_room(root->get(), path, bytes);
}

result<bool> guest_backend::check_kept_workspace(const fs::path& guest_dir) const {
  struct stat st {};
  if (::stat(guest_dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      // The root itself missing is the host's problem, not this guest's.
      if (::access(guest_dir.parent_path().c_str(), F_OK) != 0)
        return fail(ec::unavailable, "the workspace root " + guest_dir.parent_path().string() +
                                         " is missing: " + std::strerror(errno));
      return fail(ec::not_found, "the kept workspace of this sandbox (" + guest_dir.string() +
                                     ") is gone; delete the sandbox");
    }
    return fail(ec::unavailable,
                "cannot reach " + guest_dir.string() + ": " + std::strerror(errno));
  }
  if (::access(guest_dir.c_str(), W_OK) != 0)
    return fail(ec::unavailable, "the workspace root " + guest_dir.string() +
                                     " is not writable: " + std::strerror(errno));
  return true;
}

result<bool> guest_backend::check_image(const fs::path& image) {
  if (::access(image.c_str(), F_OK) != 0)
    return fail(ec::not_found, "the workspace image " + image.string() +
                                   " of this sandbox is gone; delete the sandbox");
  if (::access(image.c_str(), R_OK | W_OK) != 0)
    return fail(ec::unavailable, "the workspace image " + image.string() +
                                     " is not writable: " + std::strerror(errno));
  // No journal: after a host crash the file system is marked unclean and -p repairs what
  // is safe to repair; on a clean one it returns at once. 1 = errors corrected.
  auto out = run_command({impl_->cfg.e2fsck, "-p", image.string()},
                         command_options{{}, -1, {}, std::chrono::seconds(60)});
  if (!out) return unusable("checking the workspace", out.error());
  if (out->exit_code != 0 && out->exit_code != 1)
    return fail(ec::unavailable, "the workspace image " + image.string() +
                                     " needs a manual check (e2fsck -p exit " +
                                     std::to_string(out->exit_code) + "): " + out->output);
  return true;
}

unique_fd guest_backend::tear_down(guest_runtime& g, std::optional<failure>& first) {
  // A record persisted before its guest was built (the control plane stopped mid-create)
  // names only the id, yet cgroups, a shim already in them, a netns and a workspace may
  // exist: create names each of them by the id alone, so remove those.
  if (g.cgroup_dirs.empty() && g.init_pid <= 0) {
    if (impl_->layout) g.cgroup_dirs = guest_cgroup_dirs(*impl_->layout, g.id);
    if (g.netns.empty()) g.netns = netns_name(g.id); // absent: nothing to delete
  }
  // Pinned through the root only guest_root proves the init's (not a zombie's): no alive()
  // first, a second read of its /proc/<pid>/stat. A dying init's still-mounted workspace
  // is pinned too, its last release then the releaser's.
  unique_fd workspace_pin;
  if (g.init_pid > 0)
    if (auto root = impl_->guest_root(g)) workspace_pin = pin_workspace(root->get());
  // Then runsc's files (a gVisor guest's, or a half-built one's: named by the id alone),
  // once every runsc process is gone with the cgroups.
  if (auto ok = kill_and_remove(g.cgroup_dirs, teardown_timeout); !ok)
    first = ok.error();
  else if (auto rm = remove_gvisor_state(impl_->cfg.state_dir, g.id); !rm)
    first = rm.error();
  if (!g.netns.empty())
    if (auto ok = destroy_guest_net(g.netns); !ok && !first) first = ok.error();
  if (!g.netns.empty() && g.isolation == guest_isolation::gvisor && impl_->support.nftables)
    if (auto ok = remove_host_side_rules(impl_->tools, g.id); !ok && !first) first = ok.error();
  return workspace_pin;
}

result<bool> guest_backend::checkpoint(const guest_runtime& g, const fs::path& dir) {
  if (auto ok = check_owned(g, impl_->cfg.state_dir, impl_->cfg.workspace_root); !ok) return ok;
  if (g.isolation != guest_isolation::gvisor)
    return fail(ec::bad_request, "only a gVisor guest can be checkpointed");
  if (!alive(g)) return fail(ec::guest_failed, "the sandbox is not running");
  const auto paths = gvisor_paths_for(impl_->cfg.state_dir, g.id);
  // Memory is written out: seconds for a large sandbox on a loaded host.
  return write_checkpoint(
      [&](const std::vector<std::string>& args) {
        return run_runsc(impl_->cfg.runsc, paths, g.netns, args, std::chrono::seconds(120));
      },
      g.id, dir);
}

size_t guest_backend::remove_stray_gvisor_state(const std::set<std::string>& live) {
  size_t removed = 0;
  std::error_code ec_;
  for (fs::directory_iterator it{impl_->cfg.state_dir / "gvisor", ec_}, end; !ec_ && it != end;
       it.increment(ec_)) {
    const auto id = it->path().filename().string();
    if (!it->is_directory(ec_) || id == "rootfs" || live.count(id) || !check_id(id)) continue;
    bool busy = false;
    if (impl_->layout)
      for (const auto& d : guest_cgroup_dirs(*impl_->layout, id))
        busy = busy || !cgroup_pids(d).empty();
    if (!busy && remove_gvisor_state(impl_->cfg.state_dir, id)) ++removed;
  }
  return removed;
}

result<bool> guest_backend::stop(const guest_runtime& recorded) {
  if (auto ok = check_owned(recorded, impl_->cfg.state_dir, impl_->cfg.workspace_root); !ok)
    return ok;
  guest_runtime g = recorded;
  std::optional<failure> first;
  // Unmounted here, before stop returns: a start may attach the image again at once.
  tear_down(g, first).reset();
  if (first) return *first;
  return true;
}

result<bool> guest_backend::destroy(const guest_runtime& recorded) {
  if (auto ok = check_owned(recorded, impl_->cfg.state_dir, impl_->cfg.workspace_root); !ok)
    return ok;
  guest_runtime g = recorded;
  if (g.cgroup_dirs.empty() && g.init_pid <= 0 && g.workspace.empty())
    g.workspace = impl_->cfg.state_dir / "guests" / g.id / "workspace";
  std::optional<failure> first;
  // The pin goes to the releaser's thread: the unmount and loop detach wait for RCU grace
  // periods, off the caller's path.
  auto workspace_pin = tear_down(g, first);
  if (!g.workspace.empty()) {
    // The guest's processes are gone, and with them the only mounts of its workspace's file
    // system and (autoclear) its loop device: the image is just a file now.
    if (auto ok = workspace_disks::remove_image(workspace_image_path(g.workspace));
        !ok && !first)
      first = ok.error();
    std::error_code ec_;
    fs::remove_all(g.workspace, ec_); // a workspace made without a quota
    if (ec_ && !first)
      first =
          fail(ec::unavailable, "cannot remove " + g.workspace.string() + ": " + ec_.message());
    if (under_root(g.workspace, impl_->cfg.workspace_root)) {
      ::unlink((g.workspace.parent_path() / shared_spec_file).c_str());
      ::unlink((g.workspace.parent_path() / shared_ingress_file).c_str());
    }
    remove_checkpoint(checkpoint_dir(g.workspace.parent_path())); // a gVisor guest's memory
    ::rmdir(g.workspace.parent_path().c_str()); // the guest's directory, now empty
  }
  impl_->releaser.release(std::move(workspace_pin));
  if (first) return *first;
  return true;
}

} // namespace guestflow::local
