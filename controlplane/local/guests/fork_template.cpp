#include "controlplane/local/guests/fork_template.hpp"

#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/guests/guest_init.hpp"
#include "messages/image.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <functional>
#include <poll.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <system_error>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

/// The template imports the engine before it is ready: seconds, more on a loaded host.
constexpr auto template_timeout = std::chrono::seconds{90};
constexpr auto clone_timeout = std::chrono::seconds{10};
constexpr uint64_t template_min_mib = 1024;

/// A slot's id: per state dir (cgroups are named by id host-wide, and tests run several
/// control planes at once).
std::string slot_id(const guest_backend& backend, size_t slot) {
  char hash[17];
  std::snprintf(hash, sizeof hash, "%08zx",
                std::hash<std::string>{}(backend.config().state_dir.string()) & 0xffffffffu);
  return std::string{"fork-template-"} + hash + "-" + std::to_string(slot);
}

bool wait_readable(int fd, clock_type::time_point deadline) {
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, int(left.count()));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

/// One packet, within the deadline ("" on EOF or timeout).
std::string read_packet(int fd, clock_type::time_point deadline) {
  if (!wait_readable(fd, deadline)) return {};
  std::string buf(4096, '\0');
  auto n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
  buf.resize(n > 0 ? size_t(n) : 0);
  return buf;
}

/// One packet and the descriptors it carries (SCM_RIGHTS, at most 2), within the deadline.
std::string read_packet(int fd, clock_type::time_point deadline, std::vector<unique_fd>& fds) {
  if (!wait_readable(fd, deadline)) return {};
  std::string buf(4096, '\0');
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  // Room for the sender's credentials too (SO_PASSCRED: accept_peer).
  alignas(cmsghdr) char ctrl[CMSG_SPACE(2 * sizeof(int)) + CMSG_SPACE(sizeof(ucred))] = {};
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  auto n = ::recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  for (auto* c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int got = -1;
        std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
        fds.emplace_back(got);
      }
  buf.resize(n > 0 ? size_t(n) : 0);
  return buf;
}

/// The host pid a pidfd refers to (its fdinfo's "Pid:"), or 0.
pid_t pidfd_pid(int pidfd) {
  std::ifstream info{"/proc/self/fdinfo/" + std::to_string(pidfd)};
  std::string line;
  while (std::getline(info, line))
    if (line.rfind("Pid:", 0) == 0) return pid_t(std::atoi(line.c_str() + 4));
  return 0;
}

/// `pid`'s pid in its own (innermost) pid namespace: the last field of "NSpid:", or 0.
pid_t innermost_pid(pid_t pid) {
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("NSpid:", 0) == 0) return pid_t(std::atoi(line.c_str() + line.rfind('\t')));
  return 0;
}

bool send_packet(int fd, const std::string& text, int pass_fd = -1) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    auto* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == ssize_t(text.size());
}

/// Accepts a connection within the deadline; its peer's host pid in `pid`.
unique_fd accept_peer(int listener, clock_type::time_point deadline, pid_t& pid) {
  if (!wait_readable(listener, deadline)) return {};
  unique_fd c{::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)};
  if (!c) return {};
  ucred cred{};
  socklen_t len = sizeof cred;
  if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return {};
  pid = cred.pid;
  // The run a forked guest's init starts says "run" from its own pid (python_waiter.cpp).
  int one = 1;
  ::setsockopt(c.get(), SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
  return c;
}

/// Whether a process of the pid namespace `pid` belongs to (a template's bwrap pid 1, its
/// keeper or the template) is a guest cloned from it: a process there in a pid namespace of
/// its own. Guests live in the template's pid namespace and die with its sandbox.
bool clones_alive(pid_t pid) {
  std::error_code ec;
  const auto base = "/proc/" + std::to_string(pid);
  const auto own = fs::read_symlink(base + "/ns/pid", ec);
  if (ec) return false;
  for (const auto& e : fs::directory_iterator{base + "/root/proc", ec}) {
    auto name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    // A clone that is dying (a delete just killed it: its cgroup is empty before it is a
    // zombie, reaped at once) is none: state Z or X, or PF_EXITING (field 9).
    std::ifstream stat{e.path() / "stat"};
    std::string line;
    if (!std::getline(stat, line)) continue; // it just ended
    std::istringstream fields{line.substr(line.rfind(')') + 1)};
    std::string state, skip;
    uint64_t flags = 0;
    fields >> state >> skip >> skip >> skip >> skip >> skip >> flags;
    if (state == "Z" || state == "X" || (flags & 0x4) != 0) continue;
    std::error_code ns_ec;
    auto ns = fs::read_symlink(e.path() / "ns" / "pid", ns_ec);
    if (ns_ec == std::errc::no_such_file_or_directory) continue; // it just ended
    if (ns_ec || ns != own) return true;                         // unreadable: kept, as in use
  }
  return false;
}

/// Whether `pid` is in a pid namespace other than this process's (the outer bwrap, the
/// shim, is not: its /proc is the host's).
bool own_pid_ns(pid_t pid) {
  std::error_code ec;
  auto theirs = fs::read_symlink("/proc/" + std::to_string(pid) + "/ns/pid", ec);
  return !ec && theirs != fs::read_symlink("/proc/self/ns/pid", ec);
}

} // namespace

void fork_template::kill_stale(guest_backend& backend) {
  auto layout = detect_cgroups();
  for (size_t slot = 0; slot < max_slots; ++slot) {
    auto id = slot_id(backend, slot);
    auto spool = backend.config().state_dir / "fork" / id;
    std::error_code ec_;
    if (!fs::exists(spool, ec_)) continue; // the spool is made before the template starts
    // One whose guests still run (taken guests outlive their server) stays, slot and all.
    bool in_use = false;
    for (const auto& dir : layout ? guest_cgroup_dirs(*layout, id) : std::vector<std::string>{})
      for (pid_t pid : cgroup_pids(dir))
        in_use = in_use || (own_pid_ns(pid) && clones_alive(pid));
    if (in_use) continue;
    guest_runtime rt;
    rt.id = id;
    backend.destroy(rt);
    fs::remove_all(spool, ec_);
  }
}

std::vector<std::string> waiter_preload_args(const std::vector<std::string>& preload) {
  std::string modules;
  for (const auto& m : preload)
    modules += (modules.empty() ? "" : ",") + m;
  if (modules.empty()) return {};
  std::vector<std::string> out{modules};
  if (std::find(preload.begin(), preload.end(), preload_runner) != preload.end())
    out.emplace_back(flow_run_main_script);
  return out;
}

result<std::unique_ptr<fork_template>> fork_template::start(
    guest_backend& backend, const guest_spec& pool_spec, const std::vector<std::string>& env,
    const std::vector<std::string>& preload, const std::string& waiter, size_t slot) {
  // The first free slot from `slot` on (one a dead server's template still holds is not).
  std::error_code ec_;
  while (slot < max_slots &&
         fs::exists(backend.config().state_dir / "fork" / slot_id(backend, slot), ec_))
    ++slot;
  if (slot >= max_slots) return fail(ec::capacity, "no fork template slot left");
  std::unique_ptr<fork_template> t{new fork_template(backend)};
  const auto id = slot_id(backend, slot);
  t->spool_ = backend.config().state_dir / "fork" / id;
  fs::create_directories(t->spool_, ec_);
  if (ec_) return fail(ec::unavailable, "fork template spool: " + ec_.message());
  ::chmod(t->spool_.c_str(), 0755);
  const auto sock_path = (t->spool_ / "ctl.sock").string();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (sock_path.size() >= sizeof addr.sun_path)
    return fail(ec::unavailable, "fork template socket path too long: " + sock_path);
  std::memcpy(addr.sun_path, sock_path.c_str(), sock_path.size() + 1);
  t->listen_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!t->listen_ ||
      ::bind(t->listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::chmod(sock_path.c_str(), 0666) != 0 || ::listen(t->listen_.get(), 64) != 0)
    return fail(ec::unavailable, std::string{"fork template socket: "} + std::strerror(errno));

  guest_spec spec = pool_spec;
  spec.id = id;
  spec.name = "fork-template";
  spec.envs.clear();
  spec.mounts.clear();
  spec.shape_info.mem_mib = std::max(spec.shape_info.mem_mib, template_min_mib);
  auto preload_args = waiter_preload_args(preload);
  if (preload_args.empty()) preload_args.emplace_back(); // PRELOAD: none
  const auto spool = t->spool_;
  spec.launch = [&](const launch_request& base) -> result<launched_init> {
    // The guests' deny-list, which each clone stacks (the template runs without it).
    if (!base.seccomp) return fail(ec::unavailable, "fork template: no seccomp program");
    std::ofstream bpf{spool / "seccomp.bpf", std::ios::binary};
    bpf.write(reinterpret_cast<const char*>(base.seccomp->data()),
              std::streamsize(base.seccomp->size() * sizeof(sock_filter)));
    bpf.close();
    if (!bpf) return fail(ec::unavailable, "fork template: cannot write its seccomp program");
    // The guests' init (guest_init/init.cpp's fork mode), which the template spawns per
    // guest from a memfd of this file's bytes.
    std::ofstream init{spool / "guest-init", std::ios::binary};
    init.write(guest_init_image().data(), std::streamsize(guest_init_image().size()));
    init.close();
    if (!init) return fail(ec::unavailable, "fork template: cannot write the guests' init");
    launch_request req = base;
    req.ro_binds.push_back(spool.string());
    req.template_caps = {"CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_NET_ADMIN"};
    // Exactly the pool's exec environment: the interpreter starts as a run's would.
    req.template_command = {"/usr/bin/env", "-i"};
    req.template_command.insert(req.template_command.end(), env.begin(), env.end());
    req.template_command.insert(
        req.template_command.end(),
        {"python3", "-c", fork_template_script, spool.string(), preload_args[0], waiter});
    // After WAITER: what the waiter takes after its preload (the flow run's program).
    req.template_command.insert(req.template_command.end(), preload_args.begin() + 1,
                                preload_args.end());
    req.timeout = template_timeout;
    return launch_guest_init(req);
  };
  auto rt = backend.create(spec);
  if (!rt) {
    fs::remove_all(t->spool_, ec_);
    return fail(rt.error().code, "fork template: " + rt.error().message);
  }
  t->rt_ = *rt;
  // Its hello: from bwrap's pid 1's child, the template's python3.
  const auto deadline = clock_type::now() + clone_timeout;
  pid_t pid = 0;
  t->conn_ = accept_peer(t->listen_.get(), deadline, pid);
  auto st = pid > 0 ? read_process_stat(pid) : std::nullopt;
  auto hello = t->conn_ ? read_packet(t->conn_.get(), deadline) : std::string{};
  // Its parent is the keeper (fork_template.py's keep()), bwrap's pid 1's child.
  auto keeper = st ? read_process_stat(st->ppid) : std::nullopt;
  if (!t->conn_ || !keeper || keeper->ppid != rt->init_pid || hello.rfind("template\n", 0) != 0)
    return fail(ec::unavailable, "fork template: it did not connect as the template");
  t->template_pid_ = pid;
  size_t at = 0;
  while ((at = hello.find("problem ", at)) != std::string::npos) {
    auto end = hello.find('\n', at);
    t->problems_.push_back(hello.substr(at + 8, end - at - 8));
    at = end;
  }
  return t;
}

fork_template::~fork_template() {
  conn_.reset();
  // Its clones die with it (its pid namespace): one a taken guest still needs stays, as
  // taken guests outlive the server; the next server's kill_stale() ends it once unused.
  if (rt_.init_pid > 0 && clones_alive(rt_.init_pid)) return;
  if (!rt_.id.empty()) backend_.destroy(rt_);
  std::error_code ec_;
  fs::remove_all(spool_, ec_);
  kill_stale(backend_); // and those an earlier server left whose clones are gone since
}

bool fork_template::alive() const {
  std::lock_guard<std::mutex> lock{mu_};
  if (!conn_ || !backend_.alive(rt_)) return false;
  auto st = read_process_stat(template_pid_);
  return st && st->state != 'Z' && st->state != 'X';
}

result<launched_init> fork_template::clone(const launch_request& req, unique_fd& ctl) {
  const auto deadline = clock_type::now() + clone_timeout;
  unique_fd c;
  std::vector<unique_fd> pidfds; // the guest's init, then its run
  {
    // One request at a time until its guest has connected (the connection that comes is
    // its); the guest's setup, from its cgroups on, runs beside other builders' guests.
    std::lock_guard<std::mutex> lock{mu_};
    if (!conn_ || !send_packet(conn_.get(), req.id + " " + req.hostname + "\n"))
      return fail(ec::unavailable, "fork template: it is gone");
    std::string hello;
    for (;;) {
      pid_t pid = 0;
      c = accept_peer(listen_.get(), deadline, pid);
      if (!c)
        return fail(ec::unavailable, "fork template: the guest did not connect in time" +
                                         (hello.empty() ? "" : " (it said " + hello + ")"));
      if (pid != template_pid_) continue; // connected by the template only
      pidfds.clear();
      hello = read_packet(c.get(), deadline, pidfds);
      if (hello.rfind("error " + req.id + " ", 0) == 0)
        return fail(ec::unavailable,
                    "fork template: the guest failed: " + hello.substr(7 + req.id.size(), 300));
      if (hello == "guest " + req.id + "\n" && pidfds.size() == 2) break;
      // An earlier, abandoned guest: its init's end ends its pid namespace.
      if (!pidfds.empty())
        ::syscall(SYS_pidfd_send_signal, pidfds[0].get(), SIGKILL, nullptr, 0);
    }
  }
  auto undo = [&](const std::string& why) -> failure {
    for (const auto& fd : pidfds)
      ::syscall(SYS_pidfd_send_signal, fd.get(), SIGKILL, nullptr, 0);
    return fail(ec::unavailable, "fork template: " + why);
  };
  // Both the template's children, the init pid 1 of the run's pid namespace (the run pid 2):
  // the pids the cgroups get are the guest's, whoever else the sandbox holds.
  const pid_t init = pidfd_pid(pidfds[0].get()), run = pidfd_pid(pidfds[1].get());
  auto init_st = init > 0 ? read_process_stat(init) : std::nullopt;
  auto run_st = run > 0 ? read_process_stat(run) : std::nullopt;
  std::error_code e1, e2;
  if (!init_st || !run_st || init_st->ppid != template_pid_ || run_st->ppid != template_pid_ ||
      innermost_pid(init) != 1 || innermost_pid(run) != 2 ||
      fs::read_symlink("/proc/" + std::to_string(init) + "/ns/pid", e1) !=
          fs::read_symlink("/proc/" + std::to_string(run) + "/ns/pid", e2) ||
      e1 || e2)
    return undo("the guest's init and run are not the template's, in one pid namespace");
  for (const auto& procs : req.cgroup_procs)
    for (pid_t pid : {init, run}) {
      std::ofstream f{procs};
      f << pid;
      f.close();
      if (!f) return undo("cannot move the guest into " + procs);
    }
  unique_fd own;
  int ws = req.workspace_fd;
  if (ws < 0) {
    // No quota: the workspace directory, as a detached mount of its own.
    own.reset(static_cast<int>(::syscall(SYS_open_tree, AT_FDCWD, req.workspace.c_str(),
                                         1 /* OPEN_TREE_CLONE */ | O_CLOEXEC)));
    if (!own) return undo(std::string{"open_tree workspace: "} + std::strerror(errno));
    ws = own.get();
  }
  if (!send_packet(c.get(), "go\n", ws)) return undo("the guest went away");
  auto said = read_packet(c.get(), deadline);
  if (said != "ready\n")
    return undo("the guest did not become one" +
                (said.rfind("error ", 0) == 0 ? ": " + said.substr(0, 300) : std::string{}));
  if (!read_process_stat(run)) return undo("the guest's run ended");
  ctl = std::move(c);
  return launched_init{init, init_st->start_time};
}

} // namespace guestflow::local
