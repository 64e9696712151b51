#include "controlplane/local/guests/sandbox_launch.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/guest_init.hpp"
#include "controlplane/local/guests/gvisor_sandbox.hpp"
#include "controlplane/local/guests/seccomp_filter.hpp"
#include "controlplane/local/guests/spawn_helper.hpp"
#include "controlplane/local/guests/spawn_helper/protocol.hpp"
#include "controlplane/local/network/netns_socket.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <poll.h>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

using clock_type = std::chrono::steady_clock;

// Descriptor numbers as bwrap sees them (arranged in B right before exec). The status pipe
// comes last: 10 for a guest (9 is its init), 9 for a fork template (its own command).
constexpr int fd_ready = 3, fd_info = 4, fd_seccomp = 5, fd_passwd = 6, fd_group = 7,
              fd_hosts = 8, fd_init = 9;

/// bwrap (running as the guest uid) resolves bind sources with realpath(), so the
/// workspace must sit on a path the guest uid may traverse — the control plane's state
/// dir need not be. B therefore binds the workspace onto this fixed, world-traversable
/// mountpoint in a private mount namespace of its own (host mounts never change), and
/// bwrap binds it from there.
constexpr const char* workspace_mountpoint = "/run/guestflow/workspace";
/// The same for an image's root and its read-only binds (ro_mountpoint(i)).
constexpr const char* rootfs_mountpoint = "/run/guestflow/rootfs";
constexpr const char* ro_mountpoints = "/run/guestflow/ro";
/// And a create's bind mounts (bind_mountpoint(i)).
constexpr const char* bind_mountpoints = "/run/guestflow/mnt";

std::string ro_mountpoint(size_t i) {
  return std::string{ro_mountpoints} + "/" + std::to_string(i);
}

std::string bind_mountpoint(size_t i) {
  return std::string{bind_mountpoints} + "/" + std::to_string(i);
}

/// A guest's init: the memfd bwrap inherits as fd_init (exec'd through /proc).
const std::string guest_init_path = "/proc/self/fd/" + std::to_string(fd_init);

using namespace spawn::launch;

std::string step_text(int32_t s) {
  switch (s) {
  case step_setsid:
    return "setsid";
  case step_fork_shim:
    return "forking the guest's shim";
  case step_cgroup:
    return "joining the guest's cgroups";
  case step_netns:
    return "joining the guest's network namespace";
  case step_mountns:
    return "making a private mount namespace for the shim";
  case step_workspace:
    return "attaching the workspace";
  case step_image_root:
    return "binding the image's root";
  case step_ro_bind:
    return "binding the image's read-only directories (refused where a path component "
           "became a symlink since the image was added)";
  case step_setgroups:
    return "clearing supplementary groups";
  case step_setgid:
    return "switching to the guest gid";
  case step_setuid:
    return "switching to the guest uid";
  case step_subreaper:
    return "the control plane is a child subreaper, so the guest would die with it";
  case step_fds:
    return "arranging file descriptors";
  default:
    return "exec bwrap";
  }
}

/// The guest init (guest_init.hpp) as a sealed memfd, made once, for a launch that brings
/// none: every guest runs it, not only image roots. It does what `sh -c 'echo >&3; exec
/// 3>&- sleep infinity'` did on the host layout without two dynamically linked execs:
/// ~1.5 ms of CPU less per guest (bench/README.md, "The local control plane against raw
/// bwrap").
result<int> shared_init_fd() {
  static std::once_flag once;
  static std::optional<result<unique_fd>> fd;
  std::call_once(once, [] { fd.emplace(sealed_memfd("guestflow-init", guest_init_image())); });
  if (!*fd) return fd->error();
  return (*fd)->get();
}

result<unique_fd> memfd_with(const char* name, const std::string& content) {
  unique_fd fd{::memfd_create(name, MFD_CLOEXEC)};
  if (!fd || ::write(fd.get(), content.data(), content.size()) != ssize_t(content.size()) ||
      ::lseek(fd.get(), 0, SEEK_SET) != 0)
    return fail(ec::unavailable, std::string{"memfd: "} + std::strerror(errno));
  return fd;
}

/// Reads a pipe until EOF (or `max` bytes), within the deadline.
std::optional<std::string> read_all(int fd, clock_type::time_point deadline,
                                    size_t max = 4096) {
  std::string out;
  char buf[1024];
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, int(left.count()));
    if (rc < 0 && errno != EINTR) return std::nullopt;
    if (rc <= 0) continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return out;
    out.append(buf, size_t(n));
    if (out.size() >= max) return out;
  }
}

/// What bwrap said on stderr (non-blocking: whatever is there).
std::string drain(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  std::string out;
  char buf[1024];
  ssize_t n;
  while (out.size() < 8192 && (n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, size_t(n));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::optional<pid_t> parse_child_pid(const std::string& info) {
  auto key = info.find("\"child-pid\"");
  if (key == std::string::npos) return std::nullopt;
  auto colon = info.find(':', key);
  if (colon == std::string::npos) return std::nullopt;
  // The value: the run of digits after the colon (and any blanks), e.g. `"child-pid": 42,`.
  auto start = info.find_first_not_of(blanks, colon + 1);
  if (start == std::string::npos) return std::nullopt;
  auto end = info.find_first_not_of("0123456789", start);
  auto digits =
      std::string_view{info}.substr(start, end == std::string::npos ? end : end - start);
  auto v = parse_uint(digits, 1, uint64_t(std::numeric_limits<pid_t>::max()));
  if (!v) return std::nullopt;
  return pid_t(*v);
}

failure launch_failed(const std::string& what, int err_fd) {
  auto said = drain(err_fd);
  return fail(ec::unavailable, "starting the guest failed: " + what +
                                   (said.empty() ? std::string{} : " (bwrap: " + said + ")"));
}

/// A directory B binds onto its mountpoint before exec'ing the sandbox.
struct image_mount {
  std::string source, mountpoint;
  bool no_symlinks = false;
};

/// The image's root and read-only binds and the create's bind mounts, in B's order, their
/// mountpoints made.
result<std::vector<image_mount>> shim_mounts(const launch_request& req) {
  // The read-only binds are host directories outside the state dir (a Python environment,
  // perhaps in a user's home): B opens them without following any symlink and binds what it
  // opened, so that a directory swapped for a symlink later cannot redirect the bind.
  std::vector<image_mount> image_mounts;
  if (!req.root.empty()) image_mounts.push_back({req.root, rootfs_mountpoint, false});
  for (size_t i = 0; i < req.ro_binds.size(); ++i)
    image_mounts.push_back({req.ro_binds[i], ro_mountpoint(i), true});
  // A workspace directory is opened through the workspace's mountpoint, which B attaches
  // before it binds these: a symlink the guest left in its workspace is refused there too.
  for (size_t i = 0; i < req.mounts.size(); ++i) {
    const auto& m = req.mounts[i];
    image_mounts.push_back({m.workspace_dir.empty()
                                ? m.host_path
                                : std::string{workspace_mountpoint} + "/" + m.workspace_dir,
                            bind_mountpoint(i), true});
  }
  std::error_code mk;
  std::filesystem::create_directories(workspace_mountpoint, mk);
  ::chmod("/run/guestflow", 0755);
  for (const auto& m : image_mounts) {
    std::filesystem::create_directories(m.mountpoint, mk);
    if (mk)
      return fail(ec::unavailable,
                  "cannot create the mountpoint " + m.mountpoint + ": " + mk.message());
  }
  if (!req.ro_binds.empty()) ::chmod(ro_mountpoints, 0755);
  if (!req.mounts.empty()) ::chmod(bind_mountpoints, 0755);
  return image_mounts;
}

/// The cgroup.procs files B joins and the netns it enters, opened.
struct shim_joins {
  std::vector<unique_fd> procs;
  unique_fd netns;
};

result<shim_joins> open_joins(const launch_request& req) {
  shim_joins j;
  for (const auto& p : req.cgroup_procs) {
    j.procs.emplace_back(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
    if (!j.procs.back())
      return fail(ec::unavailable, "cannot open " + p + ": " + std::strerror(errno));
  }
  if (!req.netns_path.empty()) {
    j.netns.reset(::open(req.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!j.netns)
      return fail(ec::unavailable,
                  "cannot open " + req.netns_path + ": " + std::strerror(errno));
  }
  return j;
}

/// The helper's `launch` arguments (spawn_helper/protocol.hpp); appends the netns, the
/// cgroup.procs files and the workspace's detached mount to `fds`.
std::vector<std::string> launch_args(const launch_request& req, const shim_joins& j,
                                     const std::vector<image_mount>& mounts, uid_t uid,
                                     gid_t gid, int fd_status, bool wait,
                                     const std::vector<std::string>& argv,
                                     std::vector<int>& fds) {
  if (j.netns) fds.push_back(j.netns.get());
  for (const auto& f : j.procs)
    fds.push_back(f.get());
  auto workspace_arg = req.workspace;
  if (req.workspace_fd >= 0) {
    workspace_arg = "@" + std::to_string(fds.size());
    fds.push_back(req.workspace_fd);
  }
  std::vector<std::string> args{"launch",
                                std::to_string(::getpid()),
                                std::to_string(uid),
                                std::to_string(gid),
                                std::to_string(fd_status),
                                std::to_string(j.procs.size()),
                                j.netns ? "1" : "0",
                                workspace_arg,
                                workspace_mountpoint,
                                wait ? "1" : "0",
                                std::to_string(mounts.size())};
  for (const auto& m : mounts)
    args.insert(args.end(), {m.source, m.mountpoint, m.no_symlinks ? "1" : "0"});
  args.insert(args.end(), argv.begin(), argv.end());
  return args;
}

std::string passwd_text(const launch_request& req) {
  const auto uid = std::to_string(req.uid), gid = std::to_string(req.gid);
  return "root:x:0:0:root:/root:/bin/sh\nguest:x:" + uid + ":" + gid +
         ":guest:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/"
         "nologin\n";
}

std::string group_text(const launch_request& req) {
  return "root:x:0:\nguest:x:" + std::to_string(req.gid) + ":\nnogroup:x:65534:\n";
}

std::string hosts_text(const launch_request& req) {
  return "127.0.0.1\tlocalhost\n127.0.1.1\t" + req.hostname +
         "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
}

/// A file of the guest's runsc directory (nothing secret: envs reach execs only).
result<bool> write_private(const std::filesystem::path& path, const std::string& content) {
  unique_fd fd{::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  if (!fd || ::write(fd.get(), content.data(), content.size()) != ssize_t(content.size()))
    return fail(ec::unavailable, "cannot write " + path.string() + ": " + std::strerror(errno));
  return true;
}

/// gVisor: B runs `runsc run --detach` as root in the guest's cgroups, netns and mounts
/// (gvisor_sandbox.hpp) and reports its exit status; the sandbox is running when it is 0.
result<launched_init> launch_gvisor(const launch_request& req) {
  namespace fs = std::filesystem;
  if ((req.workspace.empty() && req.workspace_fd < 0) || req.state_dir.empty() ||
      req.id.empty())
    return fail(ec::unavailable, "launch_guest_init: incomplete gVisor request");
  const auto deadline = clock_type::now() + req.timeout;
  const auto paths = gvisor_paths_for(req.state_dir, req.id);
  std::error_code mk;
  fs::create_directories(paths.dir.parent_path(), mk);
  ::chmod(paths.dir.parent_path().c_str(), 0711);
  if (::mkdir(paths.dir.c_str(), 0711) != 0 && errno != EEXIST)
    return fail(ec::unavailable,
                "cannot create " + paths.dir.string() + ": " + std::strerror(errno));
  for (const auto& d : {paths.bundle, paths.state, paths.etc})
    fs::create_directories(d, mk);
  if (mk)
    return fail(ec::unavailable, "cannot create " + paths.dir.string() + ": " + mk.message());
  ::unlink(paths.pid_file.c_str());
  auto init = gvisor_init_file(req.state_dir);
  if (!init) return init.error();
  for (auto [file, text] : {std::pair{"passwd", passwd_text(req)},
                            {"group", group_text(req)},
                            {"hosts", hosts_text(req)}})
    if (auto ok = write_private(paths.etc / file, text); !ok) return ok.error();

  // The bundle: what bwrap_argv gives a namespace guest, as OCI mounts.
  gvisor_spec_input spec;
  spec.hostname = req.hostname;
  spec.uid = req.uid;
  spec.gid = req.gid;
  spec.init = gvisor_init_path;
  spec.netns = req.netns_path;
  const bool image_root = !req.root.empty();
  auto& m = spec.mounts;
  if (image_root) {
    spec.root = rootfs_mountpoint;
  } else {
    std::vector<std::string> dirs = req.ro_binds;
    for (const auto& b : req.mounts)
      dirs.push_back(b.guest_path);
    if (auto ok = make_gvisor_root(paths.root, dirs); !ok) return ok.error();
    spec.root = paths.root.string();
    m.push_back({"/usr", "/usr", true, false});
    for (const char* p :
         {"/etc/ssl/certs", "/etc/nsswitch.conf", "/etc/localtime", "/etc/alternatives"})
      if (::access(p, F_OK) == 0)
        m.push_back(
            {p, p, true,
             std::string{p} != "/etc/ssl/certs" && std::string{p} != "/etc/alternatives"});
  }
  for (const char* f : {"passwd", "group", "hosts"})
    m.push_back({(paths.etc / f).string(), std::string{"/etc/"} + f, true, true});
  if (!req.netns_path.empty() && ::access("/etc/resolv.conf", F_OK) == 0)
    m.push_back({"/etc/resolv.conf", "/etc/resolv.conf", true, true});
  m.push_back({init->string(), gvisor_init_path, true, true});
  for (size_t i = 0; i < req.ro_binds.size(); ++i)
    m.push_back({ro_mountpoint(i), req.ro_binds[i], true, false});
  m.push_back({workspace_mountpoint, "/workspace", false, false});
  for (size_t i = 0; i < req.mounts.size(); ++i)
    m.push_back({bind_mountpoint(i), req.mounts[i].guest_path, req.mounts[i].read_only, false});
  if (auto ok = write_private(paths.bundle / "config.json", gvisor_oci_spec(spec)); !ok)
    return ok.error();

  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  if (!devnull) return fail(ec::unavailable, std::string{"/dev/null: "} + std::strerror(errno));
  auto joins = open_joins(req);
  if (!joins) return joins.error();
  int p[2];
  unique_fd err_r, err_w, status_r, status_w;
  for (auto [r, w] : {std::pair{&err_r, &err_w}, {&status_r, &status_w}}) {
    if (::pipe2(p, O_CLOEXEC) != 0)
      return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
    r->reset(p[0]);
    w->reset(p[1]);
  }
  auto image_mounts = shim_mounts(req);
  if (!image_mounts) return image_mounts.error();
  auto argv = gvisor_global_args(req.runsc, paths, !req.netns_path.empty());
  argv.insert(argv.end(), req.gvisor_command.begin(), req.gvisor_command.end());
  argv.insert(argv.end(), {"--bundle", paths.bundle.string(), "--pid-file",
                           paths.pid_file.string(), paths.container});
  argv = gvisor_launch_argv(std::move(argv), !req.netns_path.empty());
  // runsc's stdio: nothing in, its complaints on the err pipe (which the sandbox inherits
  // as the init's stdio and never writes to); the status pipe at 3.
  constexpr int fd_gvisor_status = 3;
  std::vector<int> fds{devnull.get(), devnull.get(), err_w.get(), status_w.get()};
  // runsc needs root (it makes its own user namespace and drops to nobody).
  auto args = launch_args(req, *joins, *image_mounts, 0, 0, fd_gvisor_status, true, argv, fds);
  auto a = spawn_helper(args, {}, fds);
  if (!a) return a.error();
  for (auto* w : {&err_w, &status_w})
    w->reset();
  child::wait_for(*a);

  auto reports = child::collect(status_r.get(), deadline);
  if (!reports) return reports.error();
  std::optional<int64_t> status;
  for (const auto& r : *reports) {
    if (r.step != 0)
      return fail(ec::unavailable,
                  "starting the guest failed: " + step_text(r.step) +
                      (r.error ? std::string{": "} + std::strerror(r.error) : std::string{}));
    status = r.value;
  }
  auto said = [&] {
    auto text = drain(err_r.get());
    return text.empty() ? std::string{} : " (runsc: " + text + ")";
  };
  if (!status || *status != 0)
    return fail(ec::unavailable,
                "starting the gVisor sandbox failed: runsc " + req.gvisor_command.front() +
                    (status ? " exited with status " + std::to_string(*status >> 8)
                            : std::string{" did not report"}) +
                    said());
  std::ifstream pid_in{paths.pid_file};
  std::string pid_text;
  std::getline(pid_in, pid_text);
  auto pid = parse_uint(pid_text, 1, uint64_t(std::numeric_limits<pid_t>::max()));
  if (!pid) return fail(ec::unavailable, "runsc wrote no sandbox pid" + said());
  auto st = read_process_stat(pid_t(*pid));
  if (!st || st->state == 'Z' || st->state == 'X')
    return fail(ec::unavailable, "the gVisor sandbox exited right after setup" + said());
  return launched_init{pid_t(*pid), st->start_time};
}

} // namespace

std::vector<std::string> bwrap_argv(const launch_request& req,
                                    const std::vector<std::string>& command) {
  const auto fd = [](int n) { return std::to_string(n); };
  std::vector<std::string> a{req.bwrap};
  auto add = [&a](std::initializer_list<std::string> args) { a.insert(a.end(), args); };
  add({"--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
       "--unshare-cgroup"});
  if (req.netns_path.empty()) add({"--unshare-net"}); // only lo inside
  add({"--die-with-parent", "--new-session", "--disable-userns", "--clearenv"});
  add({"--hostname", req.hostname});
  const bool image_root = !req.root.empty();
  if (image_root) {
    // The root: the image's tree read-only (its own /usr, /bin, /lib, /etc), private /proc,
    // /dev, /tmp. Its mountpoints exist (image_import.hpp), since nothing can be created in
    // a read-only root.
    add({"--ro-bind", rootfs_mountpoint, "/"});
    add({"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"});
    add({"--ro-bind-data", fd(fd_passwd), "/etc/passwd"});
  } else {
    // The root: the host's /usr read-only, the merged-/usr symlinks, private /proc, /dev,
    // /tmp.
    add({"--ro-bind", "/usr", "/usr"});
    add({"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64"});
    add({"--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin"});
    add({"--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--tmpfs", "/tmp"});
    // A synthesized /etc plus public host configuration only (never /etc/ssl/private: the
    // files API reads as root).
    add({"--dir", "/etc", "--ro-bind-data", fd(fd_passwd), "/etc/passwd"});
  }
  add({"--ro-bind-data", fd(fd_group), "/etc/group", "--ro-bind-data", fd(fd_hosts),
       "/etc/hosts"});
  // /etc/alternatives: Debian's update-alternatives links that /usr's own links go through
  // (numpy's libblas.so.3, hence pandas).
  if (!image_root)
    for (const char* p :
         {"/etc/ssl/certs", "/etc/nsswitch.conf", "/etc/localtime", "/etc/alternatives"})
      add({"--ro-bind-try", p, p});
  if (!req.netns_path.empty()) add({"--ro-bind-try", "/etc/resolv.conf", "/etc/resolv.conf"});
  // After /tmp, so that a directory below /tmp is bound on top of the private tmpfs.
  for (size_t i = 0; i < req.ro_binds.size(); ++i)
    add({"--ro-bind", ro_mountpoint(i), req.ro_binds[i]});
  add({"--bind", workspace_mountpoint, "/workspace", "--chdir", "/workspace"});
  for (size_t i = 0; i < req.mounts.size(); ++i)
    add({req.mounts[i].read_only ? "--ro-bind" : "--bind", bind_mountpoint(i),
         req.mounts[i].guest_path});
  for (const auto& cap : req.template_caps)
    add({"--cap-add", cap});
  if (req.template_caps.empty()) add({"--seccomp", fd(fd_seccomp)});
  add({"--info-fd", fd(fd_info), "--"});
  a.insert(a.end(), command.begin(), command.end());
  return a;
}

std::optional<process_stat> read_process_stat(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest{line.substr(close + 1)};
  process_stat st;
  std::string field;
  rest >> st.state >> st.ppid;
  for (int i = 5; i < 22 && rest >> field; ++i) {
    if (i != 9) continue;
    auto flags = parse_uint(field);
    if (!flags) return std::nullopt;
    st.flags = *flags;
  }
  if (!(rest >> st.start_time)) return std::nullopt;
  return st;
}

result<launched_init> launch_guest_init(const launch_request& req) {
  if (req.isolation == guest_isolation::gvisor) return launch_gvisor(req);
  if (!req.seccomp || (req.workspace.empty() && req.workspace_fd < 0))
    return fail(ec::unavailable, "launch_guest_init: incomplete request");
  const bool with_init = req.template_command.empty();
  int init_fd = req.init_fd;
  if (with_init && init_fd < 0) {
    auto shared = shared_init_fd();
    if (!shared) return shared.error();
    init_fd = *shared;
  }
  const auto deadline = clock_type::now() + req.timeout;

  // Everything the helper needs exists before it starts.
  unique_fd seccomp_fd;
  if (req.seccomp_fd >= 0) {
    // bwrap reads the program from the file offset: a file description of our own.
    seccomp_fd.reset(::open(("/proc/self/fd/" + std::to_string(req.seccomp_fd)).c_str(),
                            O_RDONLY | O_CLOEXEC));
    if (!seccomp_fd)
      return fail(ec::unavailable,
                  std::string{"reopening the seccomp program: "} + std::strerror(errno));
  } else {
    auto sec = seccomp_memfd(*req.seccomp);
    if (!sec) return sec.error();
    seccomp_fd.reset(*sec);
  }
  auto passwd = memfd_with("passwd", passwd_text(req));
  auto group = memfd_with("group", group_text(req));
  auto hosts = memfd_with("hosts", hosts_text(req));
  if (!passwd || !group || !hosts)
    return fail(ec::unavailable, "cannot prepare the guest's /etc");
  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  if (!devnull) return fail(ec::unavailable, std::string{"/dev/null: "} + std::strerror(errno));
  auto joins = open_joins(req);
  if (!joins) return joins.error();
  int p[2];
  unique_fd ready_r, ready_w, info_r, info_w, err_r, err_w, status_r, status_w;
  for (auto [r, w] : {std::pair{&ready_r, &ready_w},
                      {&info_r, &info_w},
                      {&err_r, &err_w},
                      {&status_r, &status_w}}) {
    if (::pipe2(p, O_CLOEXEC) != 0)
      return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
    r->reset(p[0]);
    w->reset(p[1]);
  }
  const auto argv_strings =
      with_init ? bwrap_argv(req, {guest_init_path}) : bwrap_argv(req, req.template_command);
  const int fd_status = with_init ? fd_init + 1 : fd_init;
  const int fd_count = fd_status + 1;
  const int fds_for_bwrap[] = {devnull.get(), devnull.get(),
                               err_w.get(),   ready_w.get(),
                               info_w.get(),  seccomp_fd.get(),
                               passwd->get(), group->get(),
                               hosts->get(),  with_init ? init_fd : status_w.get(),
                               status_w.get()};
  auto image_mounts = shim_mounts(req);
  if (!image_mounts) return image_mounts.error();
  // The helper (spawn_helper.hpp) is A; it forks B, which execs bwrap. bwrap's descriptors
  // first, then the netns and the cgroup.procs files (spawn_helper/protocol.hpp).
  std::vector<int> fds(std::begin(fds_for_bwrap), std::begin(fds_for_bwrap) + fd_count);
  auto args = launch_args(req, *joins, *image_mounts, req.uid, req.gid, fd_status, false,
                          argv_strings, fds);
  auto a = spawn_helper(args, {}, fds);
  if (!a) return a.error();
  // The children hold the write ends now; EOFs below mean "they are done with them".
  for (auto* w : {&ready_w, &info_w, &err_w, &status_w})
    w->reset();
  child::wait_for(*a);

  auto reports = child::collect(status_r.get(), deadline);
  if (!reports) return reports.error();
  for (const auto& r : *reports)
    if (r.step != 0)
      return fail(ec::unavailable,
                  "starting the guest failed: " + step_text(r.step) +
                      (r.error ? std::string{": "} + std::strerror(r.error) : std::string{}));
  auto info = read_all(info_r.get(), deadline);
  if (!info) return launch_failed("bwrap did not report its sandbox in time", err_r.get());
  auto pid = parse_child_pid(*info);
  if (!pid) return launch_failed("bwrap exited before creating the sandbox", err_r.get());
  auto ready = read_all(ready_r.get(), deadline, 1);
  if (!ready) return launch_failed("the sandbox did not become ready in time", err_r.get());
  if (ready->empty()) return launch_failed("the sandbox exited during setup", err_r.get());
  auto st = read_process_stat(*pid);
  if (!st || st->state == 'Z' || st->state == 'X')
    return launch_failed("the sandbox's init exited right after setup", err_r.get());
  // A fork template (the only guest that makes namespaces): its clones' namespaces get TCP
  // hash tables of their own, so that each one's teardown skips the host's. Best effort: a
  // clone is as isolated either way.
  if (!req.template_caps.empty())
    if (auto ns = open_netns_of(*pid)) set_child_tcp_hash(ns->get(), guest_tcp_hash_buckets);
  return launched_init{*pid, st->start_time};
}

} // namespace guestflow::local
