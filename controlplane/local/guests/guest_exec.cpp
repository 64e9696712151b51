#include "controlplane/local/guests/guest_exec.hpp"

#include "common/numbers.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/gvisor_sandbox.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"
#include "controlplane/local/guests/seccomp_filter.hpp"
#include "controlplane/local/guests/spawn_helper.hpp"
#include "controlplane/local/guests/spawn_helper/protocol.hpp"
#include "controlplane/local/network/netns_egress.hpp"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/syscall.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

constexpr const char* default_path = default_guest_path;

using namespace spawn::exec;

std::string step_text(int32_t s) {
  switch (s) {
  case step_cgroup:
    return "joining the guest's cgroups";
  case step_setns:
    return "entering the guest's namespaces";
  case step_chroot:
    return "entering the guest's root";
  case step_setgroups:
    return "clearing supplementary groups";
  case step_userns:
    return "entering the guest's user namespace";
  case step_clone:
    return "starting the command's process";
  case step_setsid:
    return "starting a session";
  case step_setgid:
    return "switching to the guest gid";
  case step_setuid:
    return "switching to the guest uid";
  case step_caps:
    return "dropping capabilities";
  case step_chdir:
    return "changing to /workspace";
  case step_nnp:
    return "setting no_new_privs";
  case step_fds:
    return "arranging file descriptors";
  case step_seccomp:
    return "loading the seccomp filter";
  default:
    return "step " + std::to_string(s);
  }
}

failure exec_failed(const std::string& what, ec code = ec::guest_failed) {
  return fail(code, "cannot run the command in the sandbox: " + what);
}

/// A command execve cannot take (empty, or a NUL inside): refused before anything spawns.
std::optional<failure> invalid_command(const exec_request& req) {
  if (req.cmd.empty() || req.cmd.find('\0') != std::string::npos)
    return fail(ec::bad_request, "exec needs a non-empty cmd without NUL bytes");
  for (const auto& a : req.args)
    if (a.find('\0') != std::string::npos)
      return fail(ec::bad_request, "exec arguments must not contain NUL bytes");
  return std::nullopt;
}

/// The exit watcher's pid (spawn_helper/protocol.hpp): the helper's first report on the
/// timing pipe, written before anything else; read once the helper is reaped. 0: none.
pid_t watcher_of(int timing_fd) {
  child::report r;
  if (::read(timing_fd, &r, sizeof r) != ssize_t(sizeof r) ||
      r.step != spawn::timing::step_watcher)
    return 0;
  return pid_t(r.value);
}

/// A spawn that failed: its watcher may be watching a command that became nobody's.
void drop_watcher(pid_t watcher) {
  if (watcher <= 0) return;
  ::kill(watcher, SIGKILL);
  child::wait_for(watcher);
}

/// The command handed out: a pidfd of `pid`, its pipes non-blocking, its watcher. Without a
/// pidfd the command is killed and reaped.
result<exec_process> handed_out(pid_t pid, pid_t watcher, unique_fd& out_r, unique_fd& err_r,
                                unique_fd& timing_r) {
  exec_process ep;
  ep.pid = pid;
  ep.pidfd = int(::syscall(SYS_pidfd_open, pid, 0));
  if (ep.pidfd < 0) {
    const int err = errno;
    ::kill(pid, SIGKILL);
    child::wait_for(pid);
    drop_watcher(watcher);
    return exec_failed(std::string{"pidfd_open: "} + std::strerror(err), ec::unavailable);
  }
  ::fcntl(ep.pidfd, F_SETFD, FD_CLOEXEC);
  for (auto* r : {&out_r, &err_r})
    ::fcntl(r->get(), F_SETFL, ::fcntl(r->get(), F_GETFL) | O_NONBLOCK);
  ep.stdout_fd = out_r.release();
  ep.stderr_fd = err_r.release();
  ep.watcher = watcher;
  ep.timing_fd = timing_r.release();
  return ep;
}

/// The command's pipes (stdout, stderr), the helper's status pipe and the watcher's timing
/// pipe (its read end non-blocking: read only once its writers are reaped).
struct exec_pipes {
  unique_fd out_r, out_w, err_r, err_w, status_r, status_w, timing_r, timing_w;
  std::optional<failure> make() {
    int p[2];
    for (auto [r, w] : {std::pair{&out_r, &out_w},
                        {&err_r, &err_w},
                        {&status_r, &status_w},
                        {&timing_r, &timing_w}}) {
      if (::pipe2(p, O_CLOEXEC) != 0)
        return exec_failed(std::string{"pipe: "} + std::strerror(errno), ec::unavailable);
      r->reset(p[0]);
      w->reset(p[1]);
    }
    ::fcntl(timing_r.get(), F_SETFL, O_NONBLOCK);
    return std::nullopt;
  }
  /// The helper has them now.
  void close_writers() {
    for (auto* w : {&out_w, &err_w, &status_w, &timing_w})
      w->reset();
  }
};

/// Every place `cmd` may live, in PATH order (just `cmd` when it contains a slash).
std::vector<std::string> candidates(const std::string& cmd, const std::string& path) {
  if (cmd.find('/') != std::string::npos) return {cmd};
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    auto colon = path.find(':', at);
    auto dir = path.substr(at, colon == std::string::npos ? std::string::npos : colon - at);
    out.push_back((dir.empty() ? std::string{"."} : dir) + "/" + cmd);
    if (colon == std::string::npos) return out;
    at = colon + 1;
  }
}

} // namespace

std::vector<std::string> exec_environment(const std::map<std::string, std::string>& envs) {
  std::map<std::string, std::string> all{{"PATH", default_path}, {"HOME", "/workspace"}};
  for (const auto& [k, v] : envs)
    if (!k.empty() && k.find('=') == std::string::npos && k.find('\0') == std::string::npos &&
        v.find('\0') == std::string::npos)
      all[k] = v;
  all["PYTHONUNBUFFERED"] = "1";
  std::vector<std::string> out;
  for (const auto& [k, v] : all)
    out.push_back(k + "=" + v);
  return out;
}

result<exec_process> spawn_in_guest(const guest_runtime& g, const exec_request& req,
                                    const std::map<std::string, std::string>& envs,
                                    const exec_setup& setup) {
  if (auto bad = invalid_command(req)) return *bad;
  if (!setup.seccomp) return exec_failed("no seccomp filter", ec::unavailable);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);

  // Handles on the init (a pidfd: the helper enters its namespaces through it) and its
  // root, then proof that they are the init's: the pid still names the process with the
  // recorded start time.
  unique_fd init{int(::syscall(SYS_pidfd_open, g.init_pid, 0))};
  unique_fd root{::open(("/proc/" + std::to_string(g.init_pid) + "/root").c_str(),
                        O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!init || !root) return exec_failed("the guest's init is gone"); // pidfds are O_CLOEXEC
  if (auto st = read_process_stat(g.init_pid);
      !st || st->start_time != g.init_start_time || st->state == 'Z' || st->state == 'X')
    return exec_failed("the guest's init is gone");
  std::vector<unique_fd> procs;
  for (const auto& p : setup.cgroup_procs) {
    procs.emplace_back(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs.back()) return exec_failed("the guest's cgroup " + p + " is gone");
  }
  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  exec_pipes io;
  if (auto bad = io.make()) return *bad;
  if (!devnull)
    return exec_failed(std::string{"/dev/null: "} + std::strerror(errno), ec::unavailable);

  // The PATH candidates (the helper tries them in order) and the seccomp program (the
  // helper preads it, so one shared descriptor serves every exec).
  auto env = exec_environment(envs);
  std::string path_value = default_path;
  for (const auto& e : env)
    if (e.rfind("PATH=", 0) == 0) path_value = e.substr(5);
  const auto cands = candidates(req.cmd, path_value);
  unique_fd own_seccomp;
  int seccomp_fd = setup.seccomp_fd;
  if (seccomp_fd < 0) {
    auto sec = seccomp_memfd(*setup.seccomp);
    if (!sec) return exec_failed(sec.error().message, ec::unavailable);
    own_seccomp.reset(*sec);
    seccomp_fd = *sec;
  }
  std::vector<int> fds{devnull.get(), io.out_w.get(), io.err_w.get(), io.status_w.get(),
                       seccomp_fd,    root.get(),     init.get()};
  for (const auto& f : procs)
    fds.push_back(f.get());
  fds.push_back(io.timing_w.get());
  std::vector<std::string> args{"exec", std::to_string(setup.uid), std::to_string(setup.gid),
                                std::to_string(procs.size()), std::to_string(cands.size())};
  args.insert(args.end(), cands.begin(), cands.end());
  args.push_back(req.cmd);
  args.insert(args.end(), req.args.begin(), req.args.end());
  auto spawned = spawn_helper(args, env, fds);
  if (!spawned) return exec_failed(spawned.error().message, ec::unavailable);
  const pid_t x = *spawned;

  io.close_writers();
  auto reports = child::collect(io.status_r.get(), deadline);
  if (!reports) {
    ::kill(x, SIGKILL);
    child::wait_for(x);
    drop_watcher(watcher_of(io.timing_r.get()));
    return exec_failed("the guest did not let the command start (is it frozen?)");
  }
  child::wait_for(x);
  const pid_t watcher = watcher_of(io.timing_r.get());
  pid_t y = 0;
  std::optional<child::report> failed;
  for (const auto& r : *reports) {
    if (r.step == 0)
      y = pid_t(r.value);
    else if (!failed)
      failed = r;
  }
  if (failed || y <= 0) drop_watcher(watcher);
  if (failed) {
    if (y > 0) child::wait_for(y);
    std::string why = step_text(failed->step);
    if (failed->error) why += std::string{": "} + std::strerror(failed->error);
    if (failed->step == step_clone && failed->error == EAGAIN)
      why += " (the guest is at its process limit)";
    return exec_failed(why);
  }
  if (y <= 0) return exec_failed("the helper exited without starting the command");
  return handed_out(y, watcher, io.out_r, io.err_r, io.timing_r);
}

result<exec_process> spawn_in_gvisor(const guest_runtime& g, const exec_request& req,
                                     const std::map<std::string, std::string>& envs,
                                     const exec_setup& setup) {
  if (auto bad = invalid_command(req)) return *bad;
  if (auto st = read_process_stat(g.init_pid);
      !st || st->start_time != g.init_start_time || st->state == 'Z' || st->state == 'X')
    return exec_failed("the guest's sandbox is gone");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const auto paths = gvisor_paths_for(setup.state_dir, g.id);
  static std::atomic<uint64_t> serial{0};
  const auto base = (paths.dir / ("exec-" + std::to_string(++serial))).string();
  std::vector<std::string> argv{req.cmd};
  argv.insert(argv.end(), req.args.begin(), req.args.end());
  {
    // 0600: the environment may hold secrets.
    const auto spec = gvisor_process_spec(setup.uid, setup.gid, argv, exec_environment(envs));
    unique_fd fd{
        ::open((base + ".json").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
    if (!fd || ::write(fd.get(), spec.data(), spec.size()) != ssize_t(spec.size())) {
      ::unlink((base + ".json").c_str());
      return exec_failed(std::string{"writing the process spec: "} + std::strerror(errno),
                         ec::unavailable);
    }
  }
  auto cleanup = [&] {
    for (const char* suffix : {".json", ".pid"})
      ::unlink((base + suffix).c_str());
  };
  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  exec_pipes io;
  if (auto bad = io.make()) {
    cleanup();
    return *bad;
  }
  if (!devnull) {
    cleanup();
    return exec_failed(std::string{"/dev/null: "} + std::strerror(errno), ec::unavailable);
  }
  // Inside the guest's netns when it has one: runsc's control socket is there.
  unique_fd netns;
  if (!g.netns.empty()) {
    netns.reset(::open(netns_path(g.netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns) {
      cleanup();
      return exec_failed("the guest's network namespace is gone");
    }
  }
  // `runsc exec` timed by an exit watcher (spawn_helper/protocol.hpp): the sandbox's own
  // processes are not the host's to watch, the process that waits for the command is.
  const bool own_stdio = setup.stdio_fd >= 0;
  std::vector<int> fds{own_stdio ? setup.stdio_fd : devnull.get(),
                       own_stdio ? setup.stdio_fd : io.out_w.get(), io.err_w.get(),
                       io.status_w.get()};
  if (netns) fds.push_back(netns.get()); // spawn::command::fd_netns
  fds.push_back(io.timing_w.get());
  std::vector<std::string> args{"timed", std::to_string(fds.size() - 1), netns ? "1" : "0",
                                "0"};
  auto runsc = gvisor_global_args(setup.runsc, paths, bool(netns));
  args.insert(args.end(), runsc.begin(), runsc.end());
  args.insert(args.end(), {"exec", "--process", base + ".json", "--internal-pid-file",
                           base + ".pid", paths.container});
  auto spawned = spawn_helper(args, {}, fds);
  if (!spawned) {
    cleanup();
    return exec_failed(spawned.error().message, ec::unavailable);
  }
  const pid_t pid = *spawned;
  io.close_writers();
  auto reports = child::collect(io.status_r.get(), deadline);
  if (!reports || !reports->empty()) {
    ::kill(pid, SIGKILL);
    child::wait_for(pid);
    drop_watcher(watcher_of(io.timing_r.get()));
    cleanup();
    return exec_failed("runsc exec did not start");
  }
  // The helper reported its watcher before its exec closed the status pipe.
  const pid_t watcher = watcher_of(io.timing_r.get());
  auto handed = handed_out(pid, watcher, io.out_r, io.err_r, io.timing_r);
  if (!handed) {
    cleanup();
    return handed.error();
  }
  exec_process ep = std::move(*handed);
  ep.gvisor_guest = g.id;
  ep.gvisor_netns = g.netns;
  ep.gvisor_base = base;
  return ep;
}

void reap_watcher(exec_process& p) {
  if (p.watcher > 0) child::wait_for(p.watcher);
  p.watcher = 0;
  if (p.timing_fd < 0) return;
  child::report r[2];
  const bool said = ::read(p.timing_fd, r, sizeof r) == ssize_t(sizeof r) &&
                    r[0].step == spawn::timing::step_started &&
                    r[1].step == spawn::timing::step_exited;
  ::close(p.timing_fd);
  p.timing_fd = -1;
  if (!said) return;
  auto started = std::chrono::nanoseconds{r[0].value};
  if (p.handed_over)
    started = std::max(started, std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    p.handed_over->time_since_epoch()));
  const auto exited = std::chrono::nanoseconds{r[1].value};
  if (exited >= started) p.ran = exited - started;
}

void kill_gvisor_exec(const std::string& runsc, const std::string& state_dir,
                      const exec_process& p) {
  std::ifstream in{p.gvisor_base + ".pid"};
  std::string text;
  std::getline(in, text);
  auto pid = parse_uint(text, 1, uint64_t(std::numeric_limits<pid_t>::max()));
  if (!pid) return; // not started in the sandbox (yet): killing runsc exec is enough
  gvisor_kill_tree(runsc, gvisor_paths_for(state_dir, p.gvisor_guest), p.gvisor_netns,
                   pid_t(*pid));
}

} // namespace guestflow::local
