#include "controlplane/local/guests/gvisor_sandbox.hpp"

#include "common/numbers.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/guests/guest_init.hpp"
#include "controlplane/local/network/netns_egress.hpp"
#include "messages/json.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

std::string json_strings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i)
    out += (i ? "," : "") + quote_json(v[i]);
  return out + "]";
}

/// `content` at `path`, atomically (a temporary beside it, then rename): concurrent creates
/// of the first guests race to make the shared files, and every reader sees a whole one.
result<bool> write_once(const fs::path& path, std::string_view content, mode_t mode) {
  if (::access(path.c_str(), F_OK) == 0) return true;
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(::gettid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0)
    return fail(ec::unavailable, "cannot write " + tmp.string() + ": " + std::strerror(errno));
  bool ok = ::write(fd, content.data(), content.size()) == ssize_t(content.size());
  ok = ::fchmod(fd, mode) == 0 && ok;
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return fail(ec::unavailable, "cannot write " + path.string() + ": " + std::strerror(errno));
  }
  return true;
}

} // namespace

gvisor_paths gvisor_paths_for(const fs::path& state_dir, const std::string& id) {
  gvisor_paths p;
  p.dir = state_dir / "gvisor" / id;
  p.bundle = p.dir / "bundle";
  p.state = p.dir / "state";
  p.pid_file = p.dir / "sandbox.pid";
  p.root = p.dir / "rootfs";
  p.etc = p.dir / "etc";
  p.container = id;
  return p;
}

std::vector<std::string> gvisor_global_args(const std::string& runsc, const gvisor_paths& p,
                                            bool networked) {
  // ptrace: the only platform Debian 12's kernel and runsc agree on without KVM here.
  // --ignore-cgroups: the shim put runsc in the guest's cgroups already.
  // --network=sandbox: gVisor's own TCP/IP on the guest's eth0 (checkpointable; host
  // networking is not).
  return {runsc, "--root=" + p.state.string(), "--platform=ptrace",
          networked ? "--network=sandbox" : "--network=none", "--ignore-cgroups"};
}

std::vector<std::string> gvisor_launch_argv(std::vector<std::string> argv, bool networked) {
  if (!networked) return argv;
  // runsc (this version) takes a netns holding /proc/sys/net/core/rmem_default for the
  // host's root netns and refuses to move its interfaces; on Linux 6.18 every netns has
  // that file. Hidden from runsc alone: the shim's mount namespace is private (a slave of
  // the host's), and nothing runsc or the Sentry does with netstack reads /proc/sys/net.
  // A host that refuses the mount runs runsc anyway: an older kernel does not need it, and
  // on a newer one runsc's own refusal names the problem.
  std::vector<std::string> out{
      "/bin/sh", "-c",
      "/bin/mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k guestflow-no-net-sysctl "
      "/proc/sys/net 2>/dev/null; exec \"$0\" \"$@\""};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

result<command_output> run_runsc(const std::string& runsc, const gvisor_paths& p,
                                 const std::string& netns, const std::vector<std::string>& args,
                                 std::chrono::milliseconds timeout) {
  unique_fd ns;
  if (!netns.empty()) {
    ns.reset(::open(netns_path(netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns)
      return fail(ec::guest_failed, "the guest's network namespace " + netns +
                                        " is gone: " + std::strerror(errno));
  }
  auto argv = gvisor_global_args(runsc, p, !netns.empty());
  argv.insert(argv.end(), args.begin(), args.end());
  return run_command(argv, command_options{{}, ns ? ns.get() : -1, {}, timeout});
}

result<bool> check_runsc(const std::string& runsc) {
  if (::access(runsc.c_str(), X_OK) != 0)
    return fail(ec::unavailable, "isolation \"gvisor\" is unavailable on this host: " + runsc +
                                     " is missing (install the Debian package " +
                                     runsc_package + ")");
  auto out = run_command({runsc, "--version"},
                         command_options{{}, -1, {}, std::chrono::milliseconds(10000)});
  if (!out || out->exit_code != 0)
    return fail(ec::unavailable, "isolation \"gvisor\" is unavailable on this host: " + runsc +
                                     " --version failed (Debian package " + runsc_package +
                                     ")" + (out ? ": " + out->output : std::string{}));
  return true;
}

std::string gvisor_oci_spec(const gvisor_spec_input& in) {
  const auto uid = std::to_string(in.uid), gid = std::to_string(in.gid);
  std::string mounts =
      R"([{"destination":"/proc","type":"proc","source":"proc"},)"
      R"({"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","mode=755"]},)"
      R"({"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev","mode=1777"]})";
  for (const auto& m : in.mounts)
    mounts += R"(,{"destination":)" + quote_json(m.destination) +
              R"(,"type":"bind","source":)" + quote_json(m.source) + R"(,"options":[")" +
              (m.file ? "bind" : "rbind") + R"(",")" + (m.read_only ? "ro" : "rw") +
              R"(","nosuid","nodev"]})";
  mounts += "]";
  // No user namespace in the spec: runsc runs the sandbox in one of its own; the guest's
  // process is the guest uid without any capability.
  return R"({"ociVersion":"1.0.0","process":{"user":{"uid":)" + uid + R"(,"gid":)" + gid +
         R"(},"args":[)" + quote_json(in.init) +
         R"(],"env":["PATH=/usr/local/bin:/usr/bin:/bin"],"cwd":"/","capabilities":{},)"
         R"("noNewPrivileges":true},"root":{"path":)" +
         quote_json(in.root) + R"(,"readonly":true},"hostname":)" + quote_json(in.hostname) +
         R"(,"mounts":)" + mounts +
         R"(,"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"},{"type":"uts"},)"
         R"({"type":"mount"})" +
         (in.netns.empty() ? std::string{}
                           : R"(,{"type":"network","path":)" + quote_json(in.netns) + "}") +
         "]}}";
}

std::string gvisor_process_spec(uid_t uid, gid_t gid, const std::vector<std::string>& argv,
                                const std::vector<std::string>& env) {
  return R"({"user":{"uid":)" + std::to_string(uid) + R"(,"gid":)" + std::to_string(gid) +
         R"(},"args":)" + json_strings(argv) + R"(,"env":)" + json_strings(env) +
         R"(,"cwd":"/workspace","capabilities":{},"noNewPrivileges":true})";
}

result<bool> make_gvisor_root(const fs::path& root, const std::vector<std::string>& dirs) {
  std::error_code ec_;
  for (const char* d : {"usr", "proc", "dev", "tmp", "workspace", "etc/ssl/certs"})
    fs::create_directories(root / d, ec_);
  for (const auto& d : dirs)
    fs::create_directories(root / fs::path{d}.relative_path(), ec_);
  for (auto [link, target] : {std::pair{"lib", "usr/lib"},
                              {"lib64", "usr/lib64"},
                              {"bin", "usr/bin"},
                              {"sbin", "usr/sbin"}})
    fs::create_symlink(target, root / link, ec_);
  for (const char* f : {"etc/passwd", "etc/group", "etc/hosts", "etc/resolv.conf",
                        "etc/nsswitch.conf", "etc/localtime"})
    std::ofstream{root / f};
  if (ec_) return fail(ec::unavailable, "cannot make " + root.string() + ": " + ec_.message());
  return true;
}

result<fs::path> gvisor_init_file(const fs::path& state_dir) {
  const auto path = state_dir / "gvisor" / "guest-init";
  std::error_code ec_;
  fs::create_directories(path.parent_path(), ec_);
  ::chmod(path.parent_path().c_str(), 0711);
  if (auto ok = write_once(path, guest_init_image(), 0555); !ok) return ok.error();
  return path;
}

std::optional<pid_t> gvisor_gofer(const std::vector<std::string>& cgroup_dirs) {
  if (cgroup_dirs.empty()) return std::nullopt;
  for (pid_t pid : cgroup_pids(cgroup_dirs.front())) {
    std::ifstream in{"/proc/" + std::to_string(pid) + "/cmdline"};
    std::string argv0;
    if (std::getline(in, argv0, '\0') && argv0 == "runsc-gofer") return pid;
  }
  return std::nullopt;
}

void gvisor_kill_tree(const std::string& runsc, const gvisor_paths& p, const std::string& netns,
                      pid_t pid) {
  // A few rounds: a process may fork while the previous round kills.
  for (int round = 0; round < 3; ++round) {
    auto out = run_runsc(runsc, p, netns, {"ps", p.container});
    if (!out || out->exit_code != 0) return;
    // UID PID PPID … per line: the tree below `pid`.
    std::multimap<pid_t, pid_t> children;
    std::set<pid_t> listed;
    std::istringstream lines{out->output};
    std::string line;
    std::getline(lines, line); // header
    while (std::getline(lines, line)) {
      std::istringstream f{line};
      std::string uid, p1, p2;
      f >> uid >> p1 >> p2;
      auto child = parse_uint(p1), parent = parse_uint(p2);
      if (!child || !parent) continue;
      children.emplace(pid_t(*parent), pid_t(*child));
      listed.insert(pid_t(*child));
    }
    std::vector<pid_t> tree{pid};
    for (size_t i = 0; i < tree.size(); ++i) {
      auto [b, e] = children.equal_range(tree[i]);
      for (auto it = b; it != e; ++it)
        tree.push_back(it->second);
    }
    bool any = false;
    for (auto it = tree.rbegin(); it != tree.rend(); ++it) {
      if (!listed.count(*it)) continue;
      any = true;
      run_runsc(runsc, p, netns, {"kill", "--pid", std::to_string(*it), p.container, "KILL"});
    }
    if (!any) return;
  }
}

result<bool> remove_gvisor_state(const fs::path& state_dir, const std::string& id) {
  const auto dir = gvisor_paths_for(state_dir, id).dir;
  std::error_code ec_;
  fs::remove_all(dir, ec_);
  if (ec_)
    return fail(ec::unavailable,
                "cannot remove runsc's state " + dir.string() + ": " + ec_.message());
  return true;
}

} // namespace guestflow::local
