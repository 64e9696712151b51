#include "bench/local/raw_sandbox.hpp"

#include "common/numbers.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"
#include "controlplane/local/guests/seccomp_filter.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <grp.h>
#include <limits>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::bench {
namespace {

constexpr uid_t guest_uid = 60000; // launch_request's default: the backend's guest uid
constexpr gid_t guest_gid = 60000;
/// Where sandbox_launch's bwrap_argv expects the workspace (its launcher binds the guest's
/// own directory there in a private mount namespace; this floor binds `workspace` instead).
constexpr const char* workspace_mountpoint = "/run/guestflow/workspace";
/// bwrap_argv's descriptors: 4 info, 5 seccomp, 6-8 /etc/passwd, group, hosts.
constexpr int fd_info = 4, fd_seccomp = 5, fd_passwd = 6, fd_group = 7, fd_hosts = 8;

unique_fd memfd_with(const char* name, const void* data, size_t size) {
  unique_fd fd{::memfd_create(name, MFD_CLOEXEC)};
  if (!fd || ::write(fd.get(), data, size) != ssize_t(size) ||
      ::lseek(fd.get(), 0, SEEK_SET) != 0)
    throw std::runtime_error(std::string{"memfd: "} + std::strerror(errno));
  return fd;
}

unique_fd memfd_with(const char* name, const std::string& text) {
  return memfd_with(name, text.data(), text.size());
}

std::string read_to_end(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof(buf));
    if (n > 0)
      out.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      return out;
  }
}

/// bwrap's --info-fd JSON names the sandbox's pid 1 as host pid: `"child-pid": 42`.
pid_t child_pid(const std::string& info) {
  auto key = info.find("\"child-pid\"");
  if (key == std::string::npos) return 0;
  auto start = info.find_first_of("0123456789", key);
  if (start == std::string::npos) return 0;
  auto end = info.find_first_not_of("0123456789", start);
  auto v = parse_uint(info.substr(start, end == std::string::npos ? end : end - start), 1,
                      uint64_t(std::numeric_limits<pid_t>::max()));
  return v ? pid_t(*v) : 0;
}

} // namespace

raw_sandbox::raw_sandbox() {
  char path[] = "/tmp/guestflow-bench-raw.XXXXXX";
  if (!::mkdtemp(path))
    throw std::runtime_error(std::string{"mkdtemp: "} + std::strerror(errno));
  workspace_ = path;
  if (::chown(workspace_.c_str(), guest_uid, guest_gid) != 0) {
    auto why = std::string{"chown "} + workspace_ + ": " + std::strerror(errno);
    ::rmdir(path);
    throw std::runtime_error(why);
  }
  auto prog = local::build_guest_seccomp();
  if (!prog) throw std::runtime_error("seccomp: " + prog.error().message);
  seccomp_ = std::move(*prog);
  // As launch_guest_init writes them.
  const auto uid = std::to_string(guest_uid), gid = std::to_string(guest_gid);
  passwd_ = "root:x:0:0:root:/root:/bin/sh\nguest:x:" + uid + ":" + gid +
            ":guest:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/"
            "nologin\n";
  group_ = "root:x:0:\nguest:x:" + gid + ":\nnogroup:x:65534:\n";
  hosts_ = "127.0.0.1\tlocalhost\n127.0.1.1\tbench\n::1\tlocalhost ip6-localhost "
           "ip6-loopback\n";
}

raw_sandbox::~raw_sandbox() {
  std::error_code ignored;
  std::filesystem::remove_all(workspace_, ignored);
}

std::vector<std::string> raw_sandbox::argv_for(const std::vector<std::string>& command) const {
  local::launch_request req;
  req.hostname = "bench";
  auto argv = local::bwrap_argv(req, command);
  for (auto& a : argv)
    if (a == workspace_mountpoint) a = workspace_;
  return argv;
}

void raw_sandbox::run(const std::vector<std::string>& command,
                      const std::string& expected) const {
  const auto argv_strings = argv_for(command);
  std::vector<char*> argv;
  for (const auto& s : argv_strings)
    argv.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  char* envp[] = {nullptr};
  // bwrap reads each of these to the end: every launch gets its own.
  auto seccomp =
      memfd_with("seccomp", seccomp_.data(), seccomp_.size() * sizeof(seccomp_.front()));
  auto passwd = memfd_with("passwd", passwd_), group = memfd_with("group", group_),
       hosts = memfd_with("hosts", hosts_);
  unique_fd devnull{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  int out[2], info[2];
  if (!devnull || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(info, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string{"pipe: "} + std::strerror(errno));
  unique_fd out_r{out[0]}, out_w{out[1]}, info_r{info[0]}, info_w{info[1]};
  // target descriptor ← source, applied in the child.
  const int sources[] = {devnull.get(), out_w.get(),  out_w.get(), -1,         info_w.get(),
                         seccomp.get(), passwd.get(), group.get(), hosts.get()};
  constexpr int count = sizeof(sources) / sizeof(sources[0]);
  static_assert(count == fd_hosts + 1 && fd_info == 4 && fd_seccomp == 5 && fd_passwd == 6 &&
                fd_group == 7);

  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string{"fork: "} + std::strerror(errno));
  if (pid == 0) {
    // Async-signal-safe calls only. Sources first move above the targets, so that no
    // dup2 overwrites a source still to be placed.
    int moved[count];
    for (int i = 0; i < count; ++i)
      moved[i] = sources[i] < 0 ? -1 : ::fcntl(sources[i], F_DUPFD_CLOEXEC, 100);
    for (int i = 0; i < count; ++i)
      if (moved[i] >= 0 && ::dup2(moved[i], i) != i) ::_exit(126);
    ::syscall(SYS_close_range, count, ~0U, 0);
    // What the backend's shim does before bwrap (as `setpriv --reuid --regid
    // --clear-groups` would, without exec'ing setpriv first).
    if (::setgroups(0, nullptr) != 0 || ::setresgid(guest_gid, guest_gid, guest_gid) != 0 ||
        ::setresuid(guest_uid, guest_uid, guest_uid) != 0)
      ::_exit(126);
    ::execve(argv[0], argv.data(), envp);
    ::_exit(127);
  }
  out_w.reset();
  info_w.reset();
  // Both are a few bytes (bwrap's JSON, the command's line): no pipe fills while the other
  // is read to its end.
  const auto sandbox_pid = child_pid(read_to_end(info_r.get()));
  const auto output = read_to_end(out_r.get());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  // With --unshare-pid, bwrap may exit as soon as the sandbox's pid 1 reports the
  // command's exit status, leaving pid 1 (and what it still has to reap) orphaned: it
  // comes here (the bench is a subreaper) and is waited for, so that its CPU counts in
  // this process's RUSAGE_CHILDREN like the rest of the run's. ECHILD: bwrap reaped it.
  if (sandbox_pid > 0)
    while (::waitpid(sandbox_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || output != expected)
    throw std::runtime_error("raw bwrap " + command.front() + " failed (wait status " +
                             std::to_string(status) + "), output: " + output);
}

} // namespace guestflow::bench
