#include "controlplane/local/guests/guest_exec.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

constexpr const char* default_path = default_guest_path;

/// Namespaces entered in this order; the user namespace last (entering it first would
/// leave X without the capabilities the other setns calls need in their owning namespace).
constexpr struct {
  const char* name;
  int type;
} namespaces[] = {{"net", CLONE_NEWNET},       {"ipc", CLONE_NEWIPC}, {"uts", CLONE_NEWUTS},
                  {"cgroup", CLONE_NEWCGROUP}, {"pid", CLONE_NEWPID}, {"mnt", CLONE_NEWNS}};
constexpr int ns_count = int(sizeof namespaces / sizeof namespaces[0]);

enum step : int32_t {
  step_cgroup = 1,
  step_setns_first, // + index into `namespaces`
  step_chroot = step_setns_first + ns_count,
  step_setgroups,
  step_userns,
  step_clone,
  step_setsid,
  step_setgid,
  step_setuid,
  step_caps,
  step_chdir,
  step_nnp,
  step_fds,
  step_seccomp,
};

std::string step_text(int32_t s) {
  if (s >= step_setns_first && s < step_setns_first + ns_count)
    return std::string{"entering the guest's "} + namespaces[s - step_setns_first].name +
           " namespace";
  switch (s) {
  case step_cgroup:
    return "joining the guest's cgroups";
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
  if (req.cmd.empty() || req.cmd.find('\0') != std::string::npos)
    return fail(ec::bad_request, "exec needs a non-empty cmd without NUL bytes");
  for (const auto& a : req.args)
    if (a.find('\0') != std::string::npos)
      return fail(ec::bad_request, "exec arguments must not contain NUL bytes");
  if (!setup.seccomp) return exec_failed("no seccomp filter", ec::unavailable);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);

  // Handles on the init's namespaces and root, then proof that they are the init's: the
  // pid still names the process with the recorded start time.
  const auto proc = "/proc/" + std::to_string(g.init_pid);
  unique_fd ns[ns_count];
  for (int i = 0; i < ns_count; ++i) {
    ns[i].reset(::open((proc + "/ns/" + namespaces[i].name).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns[i]) return exec_failed("the guest's init is gone");
  }
  unique_fd userns{::open((proc + "/ns/user").c_str(), O_RDONLY | O_CLOEXEC)};
  unique_fd root{::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!userns || !root) return exec_failed("the guest's init is gone");
  if (auto st = read_process_stat(g.init_pid);
      !st || st->start_time != g.init_start_time || st->state == 'Z' || st->state == 'X')
    return exec_failed("the guest's init is gone");
  std::vector<unique_fd> procs;
  for (const auto& p : setup.cgroup_procs) {
    procs.emplace_back(::open(p.c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs.back()) return exec_failed("the guest's cgroup " + p + " is gone");
  }
  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  int p[2];
  unique_fd out_r, out_w, err_r, err_w, status_r, status_w;
  for (auto [r, w] : {std::pair{&out_r, &out_w}, {&err_r, &err_w}, {&status_r, &status_w}}) {
    if (::pipe2(p, O_CLOEXEC) != 0)
      return exec_failed(std::string{"pipe: "} + std::strerror(errno), ec::unavailable);
    r->reset(p[0]);
    w->reset(p[1]);
  }
  if (!devnull)
    return exec_failed(std::string{"/dev/null: "} + std::strerror(errno), ec::unavailable);

  // argv, envp, the PATH candidates and the failure messages, all before the fork.
  std::vector<std::string> arg_strings{req.cmd};
  arg_strings.insert(arg_strings.end(), req.args.begin(), req.args.end());
  std::vector<char*> argv;
  for (auto& s : arg_strings)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  auto env_strings = exec_environment(envs);
  std::vector<char*> envp;
  std::string path_value = default_path;
  for (auto& s : env_strings) {
    envp.push_back(s.data());
    if (s.rfind("PATH=", 0) == 0) path_value = s.substr(5);
  }
  envp.push_back(nullptr);
  const auto cand_strings = candidates(req.cmd, path_value);
  std::vector<const char*> cands;
  for (const auto& c : cand_strings)
    cands.push_back(c.c_str());
  const std::string not_found = "guestflow: " + req.cmd + ": command not found\n";
  const std::string cannot_run = "guestflow: " + req.cmd + ": cannot execute: errno ";
  sock_fprog prog{static_cast<unsigned short>(setup.seccomp->size()),
                  const_cast<sock_filter*>(setup.seccomp->data())};
  std::vector<int> procs_fds;
  for (const auto& f : procs)
    procs_fds.push_back(f.get());
  int ns_fds[ns_count];
  for (int i = 0; i < ns_count; ++i)
    ns_fds[i] = ns[i].get();
  const int user_fd = userns.get(), root_fd = root.get(), sfd = status_w.get();
  const int stdio[] = {devnull.get(), out_w.get(), err_w.get(), sfd};
  const uid_t uid = setup.uid;
  const gid_t gid = setup.gid;

  pid_t x = ::fork();
  if (x < 0) return exec_failed(std::string{"fork: "} + std::strerror(errno), ec::unavailable);
  if (x == 0) {
    // X: host root until setns(user).
    for (int f : procs_fds)
      if (::write(f, "0", 1) != 1) child::die(sfd, step_cgroup);
    for (int i = 0; i < ns_count; ++i)
      if (::setns(ns_fds[i], namespaces[i].type) != 0) child::die(sfd, step_setns_first + i);
    if (::fchdir(root_fd) != 0 || ::chroot(".") != 0) child::die(sfd, step_chroot);
    if (::setgroups(0, nullptr) != 0) child::die(sfd, step_setgroups);
    if (::setns(user_fd, CLONE_NEWUSER) != 0) child::die(sfd, step_userns);
    long y = ::syscall(SYS_clone, CLONE_PARENT | SIGCHLD, nullptr, nullptr, nullptr, 0);
    if (y < 0) child::die(sfd, step_clone);
    if (y > 0) {
      child::report r;
      r.value = y;
      child::send(sfd, r);
      ::_exit(0);
    }
    // Y: in the guest's pid namespace, a child of the server.
    if (::setsid() < 0) child::die(sfd, step_setsid);
    for (int cap = 0; cap <= 63; ++cap)
      ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0); // EINVAL past the last capability
    if (::setresgid(gid, gid, gid) != 0) child::die(sfd, step_setgid);
    if (::setresuid(uid, uid, uid) != 0) child::die(sfd, step_setuid);
    // The guest namespace's root uid is unmapped, so setresuid did not clear the
    // capabilities setns granted: drop them explicitly.
    __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2] = {};
    if (::syscall(SYS_capset, &hdr, data) != 0 ||
        ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
      child::die(sfd, step_caps);
    if (::chdir("/workspace") != 0) child::die(sfd, step_chdir);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) child::die(sfd, step_nnp);
    if (!child::arrange_fds(stdio, 4, 3)) child::die(sfd, step_fds);
    child::reset_signals();
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
      child::die(3, step_seccomp);
    int err = ENOENT;
    for (const char* c : cands) {
      ::execve(c, argv.data(), envp.data());
      if (errno == EACCES)
        err = EACCES;
      else if (errno != ENOENT && errno != ENOTDIR) {
        err = errno;
        break;
      }
    }
    if (err == ENOENT) {
      [[maybe_unused]] auto n = ::write(2, not_found.data(), not_found.size());
      ::_exit(127);
    }
    char num[24];
    int len = child::format_number(num, err);
    num[len++] = '\n';
    [[maybe_unused]] auto n1 = ::write(2, cannot_run.data(), cannot_run.size());
    [[maybe_unused]] auto n2 = ::write(2, num, size_t(len));
    ::_exit(126);
  }

  for (auto* w : {&out_w, &err_w, &status_w})
    w->reset();
  auto reports = child::collect(status_r.get(), deadline);
  if (!reports) {
    ::kill(x, SIGKILL);
    return exec_failed("the guest did not let the command start (is it frozen?)");
  }
  child::wait_for(x);
  pid_t y = 0;
  std::optional<child::report> failed;
  for (const auto& r : *reports) {
    if (r.step == 0)
      y = pid_t(r.value);
    else if (!failed)
      failed = r;
  }
  if (failed) {
    if (y > 0) child::wait_for(y);
    std::string why = step_text(failed->step);
    if (failed->error) why += std::string{": "} + std::strerror(failed->error);
    if (failed->step == step_clone && failed->error == EAGAIN)
      why += " (the guest is at its process limit)";
    return exec_failed(why);
  }
  if (y <= 0) return exec_failed("the helper exited without starting the command");
  exec_process ep;
  ep.pid = y;
  ep.pidfd = int(::syscall(SYS_pidfd_open, y, 0));
  if (ep.pidfd < 0) {
    ::kill(y, SIGKILL);
    child::wait_for(y);
    return exec_failed(std::string{"pidfd_open: "} + std::strerror(errno), ec::unavailable);
  }
  ::fcntl(ep.pidfd, F_SETFD, FD_CLOEXEC);
  for (auto* r : {&out_r, &err_r})
    ::fcntl(r->get(), F_SETFL, ::fcntl(r->get(), F_GETFL) | O_NONBLOCK);
  ep.stdout_fd = out_r.release();
  ep.stderr_fd = err_r.release();
  return ep;
}

} // namespace guestflow::local
