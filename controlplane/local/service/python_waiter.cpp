#include "controlplane/local/service/python_waiter.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/guests/fork_template.hpp"
#include "controlplane/local/guests/guest_exec.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/openat2.h>
#include <mutex>
#include <poll.h>
#include <regex>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local {
namespace {

/// In the guest's private /tmp: nothing but the waiter and the server ever touch it before
/// the guest's first exec, which is the only time it is used.
constexpr const char* fifo_in_guest = "tmp/.guestflow-python-waiter";
/// The waiter's list of preload failures, written before its FIFO (python_waiter.py).
constexpr const char* report_in_guest = "tmp/.guestflow-python-waiter.preload";
constexpr size_t max_report = 65536;
constexpr const char* request_magic = "guestflow-waiter-1";
/// How much longer than its caller's bound a waiter may take to import its preload (a
/// heavy engine takes seconds, more on a loaded host).
constexpr std::chrono::seconds preload_allowance{60};

/// Failures already reported by a waiter of this process.
std::mutex reported_mu;
std::set<std::string> reported;

bool changes_startup(const std::string& name) {
  if (name == "PYTHONUNBUFFERED") return false;
  return name == "PATH" || name == "HOME" || name == "TZ" || name == "LANG" ||
         name == "LANGUAGE" || name.rfind("LC_", 0) == 0 || name.rfind("PYTHON", 0) == 0;
}

/// The start-up relevant part of an environment, as NAME=VALUE strings in order.
std::vector<std::string> startup_part(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const auto& e : env)
    if (changes_startup(e.substr(0, e.find('=')))) out.push_back(e);
  std::sort(out.begin(), out.end());
  return out;
}

/// Arguments from the first on that python3 runs as a program: a script file (not an
/// option, not stdin), or `-c CODE`.
bool is_program(const std::vector<std::string>& a, size_t first) {
  if (a.size() <= first) return false;
  const auto& s = a[first];
  if (s == "-c") return a.size() > first + 1;
  return !s.empty() && s[0] != '-';
}

void add_field(std::string& out, const std::string& field) {
  out += field;
  out += '\0';
}

/// Opens the waiter's FIFO for writing through its own root, without following any symlink
/// (the path is the guest's): ENXIO until the waiter blocks reading it.
int open_in_guest(pid_t waiter, const char* path, uint64_t flags) {
  unique_fd root{::open(("/proc/" + std::to_string(waiter) + "/root").c_str(),
                        O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!root) return -1;
  open_how how{};
  how.flags = flags | O_CLOEXEC | O_NOFOLLOW;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  return static_cast<int>(::syscall(SYS_openat2, root.get(), path, &how, sizeof how));
}

int open_fifo(pid_t waiter) {
  return open_in_guest(waiter, fifo_in_guest, O_WRONLY | O_NONBLOCK);
}

bool write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    auto n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

} // namespace

bool python_waiter_wanted() {
  const char* v = std::getenv("GUESTFLOW_POOL_PYTHON");
  return !v || std::string{v} != "0";
}

python_waiter::python_waiter(guest_backend& backend, guest_runtime g, exec_process p,
                             std::vector<std::string> env, bool preloads)
    : backend_(backend)
    , guest_(std::move(g))
    , p_(p)
    , env_(std::move(env))
    , preloads_(preloads) {}

python_waiter::~python_waiter() {
  if (ctl_) {
    // A forked guest's waiting process sees EOF and ends: gone (only the init left) before
    // the exec that dropped it starts, so nobody sees a process they did not start. Its
    // template says its status (or its socket closes) once it has reaped it: no zombie left.
    ::shutdown(ctl_.get(), SHUT_WR);
    pollfd pfd{ctl_.get(), POLLIN, 0};
    while (::poll(&pfd, 1, 2000) < 0 && errno == EINTR) {
    }
    ctl_.reset();
    return;
  }
  if (p_.pid <= 0) return;
  // Its FIFO goes too (the guest's /tmp is then as fresh as a guest built on demand):
  // reached while the waiter still lives, removed once it is gone.
  unique_fd tmp{open_in_guest(p_.pid, "tmp", O_PATH | O_DIRECTORY)};
  backend_.kill_exec(p_);
  backend_.reap(p_);
  if (tmp) {
    ::unlinkat(tmp.get(), std::strchr(fifo_in_guest, '/') + 1, 0);
    ::unlinkat(tmp.get(), std::strchr(report_in_guest, '/') + 1, 0);
  }
}

bool python_waiter::await_fifo(std::chrono::milliseconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within +
                        (preloads_ ? preload_allowance : std::chrono::seconds{0});
  while (p_.pid > 0 && !exited()) {
    // O_PATH: looks at the FIFO without opening it (an open for writing would wake the
    // waiter with an empty request).
    if (unique_fd f{open_in_guest(p_.pid, fifo_in_guest, O_PATH)}) {
      if (preloads_) take_preload_report();
      return true;
    }
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return false;
}

void python_waiter::take_preload_report() {
  unique_fd tmp{open_in_guest(p_.pid, "tmp", O_PATH | O_DIRECTORY)};
  unique_fd f{open_in_guest(p_.pid, report_in_guest, O_RDONLY | O_NONBLOCK)};
  if (!f) return; // every module imported
  // The guest's file: a regular one, read up to its cap, never trusted beyond text.
  struct stat st {};
  std::string text;
  if (::fstat(f.get(), &st) == 0 && S_ISREG(st.st_mode)) {
    text.resize(max_report);
    ssize_t n;
    do
      n = ::read(f.get(), text.data(), text.size());
    while (n < 0 && errno == EINTR);
    text.resize(n > 0 ? size_t(n) : 0);
  }
  f.reset();
  if (tmp) ::unlinkat(tmp.get(), std::strchr(report_in_guest, '/') + 1, 0);
  std::istringstream lines{text};
  std::lock_guard<std::mutex> lock{reported_mu};
  for (std::string line; std::getline(lines, line);) {
    for (auto& c : line)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    if (!line.empty() && reported.insert(line).second)
      problems_.push_back("preload " + line + " (the waiter goes on without it)");
  }
}

bool python_waiter::exited() const {
  if (ctl_) { // the init says nothing before a request: readable means gone
    pollfd pfd{ctl_.get(), POLLIN, 0};
    return ::poll(&pfd, 1, 0) != 0;
  }
  if (p_.pidfd < 0) return true;
  pollfd pfd{p_.pidfd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) != 0;
}

result<std::unique_ptr<python_waiter>>
python_waiter::start(guest_backend& backend, const guest_runtime& g,
                     const std::map<std::string, std::string>& envs,
                     const std::vector<std::string>& preload) {
  exec_request req{"python3", {"-c", python_waiter_script, std::string{"/"} + fifo_in_guest}};
  for (auto& a : waiter_preload_args(preload))
    req.args.push_back(std::move(a));
  auto p = backend.start_exec(g, req, envs);
  if (!p) return p.error();
  return std::unique_ptr<python_waiter>{
      new python_waiter(backend, g, *p, exec_environment(envs), !preload.empty())};
}

std::optional<std::string>
python_waiter::request_for(const exec_request& req, const std::vector<std::string>& env,
                           const std::vector<std::string>& waiter_env) {
  std::string timeout;
  std::vector<std::string> argv;
  static const std::regex duration{R"([0-9]+(\.[0-9]+)?[smhd]?)"};
  const auto& a = req.args;
  if (req.cmd == "python3" && is_program(a, 0)) {
    argv = a;
  } else if (req.cmd == "timeout" && a.size() >= 4 && a[0] == "--kill-after=5" &&
             std::regex_match(a[1], duration) && a[2] == "python3" && is_program(a, 3)) {
    timeout = a[1];
    argv.assign(a.begin() + 3, a.end());
  } else {
    return std::nullopt;
  }
  if (startup_part(env) != startup_part(waiter_env)) return std::nullopt;
  std::string out;
  add_field(out, request_magic);
  add_field(out, timeout);
  add_field(out, "/workspace");
  add_field(out, std::to_string(argv.size()));
  for (const auto& s : argv)
    add_field(out, s);
  add_field(out, std::to_string(env.size()));
  for (const auto& e : env)
    add_field(out, e);
  return out;
}

std::unique_ptr<python_waiter> python_waiter::forked(guest_backend& backend,
                                                     const guest_runtime& g, unique_fd ctl,
                                                     std::vector<std::string> env) {
  std::unique_ptr<python_waiter> w{
      new python_waiter(backend, g, exec_process{}, std::move(env), false)};
  w->ctl_ = std::move(ctl);
  return w;
}

result<exec_process> python_waiter::serve_forked(const std::string& request) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
  unique_fd out_r{out[0]}, out_w{out[1]};
  if (::pipe2(err, O_CLOEXEC) != 0)
    return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
  unique_fd err_r{err[0]}, err_w{err[1]};
  for (int fd : {out_r.get(), err_r.get()})
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  const auto handed_over = std::chrono::steady_clock::now();
  // One packet: the request and the exec's stdout and stderr.
  iovec iov{const_cast<char*>(request.data()), request.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char ctrl[CMSG_SPACE(2 * sizeof(int))] = {};
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  auto* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(2 * sizeof(int));
  int fds[2] = {out_w.get(), err_w.get()};
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  if (::sendmsg(ctl_.get(), &msg, MSG_NOSIGNAL) != ssize_t(request.size()))
    return fail(ec::unavailable, "the forked guest's init is not listening");
  out_w.reset();
  err_w.reset();
  // From here on the run is the exec's either way. Its "run" comes from its own pid
  // (SO_PASSCRED, set by the template's accept): its host pid, for the pidfd and kills.
  pollfd pfd{ctl_.get(), POLLIN, 0};
  char buf[64];
  iovec riov{buf, sizeof buf};
  msghdr rmsg{};
  rmsg.msg_iov = &riov;
  rmsg.msg_iovlen = 1;
  alignas(cmsghdr) char rctrl[CMSG_SPACE(sizeof(ucred))] = {};
  rmsg.msg_control = rctrl;
  rmsg.msg_controllen = sizeof rctrl;
  ssize_t n = -1;
  if (::poll(&pfd, 1, 10'000) > 0) n = ::recvmsg(ctl_.get(), &rmsg, MSG_DONTWAIT);
  pid_t pid = 0;
  for (auto* h = CMSG_FIRSTHDR(&rmsg); n > 0 && h; h = CMSG_NXTHDR(&rmsg, h))
    if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_CREDENTIALS) {
      ucred cred{};
      std::memcpy(&cred, CMSG_DATA(h), sizeof cred);
      pid = cred.pid;
    }
  if (n < 4 || std::string(buf, 3) != "run" || pid <= 0)
    return fail(ec::unavailable, "the forked guest's init did not start the run");
  exec_process p;
  p.pid = pid;
  // A run that ended (and was reaped) already: its status is on the socket, which then
  // stands for the pidfd (readable once the status came).
  p.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (p.pidfd < 0) p.pidfd = ::fcntl(ctl_.get(), F_DUPFD_CLOEXEC, 3);
  p.stdout_fd = out_r.release();
  p.stderr_fd = err_r.release();
  p.status_fd = ctl_.release();
  p.handed_over = handed_over;
  // When the run took the request, on the monotonic clock (steady_clock's): its own time
  // then ends at the init's status (guest_backend::reap), not at the server's reap.
  if (auto t = std::strtoull(std::string(buf, size_t(n)).c_str() + 3, nullptr, 10); t > 0)
    p.handed_over = std::chrono::steady_clock::time_point{std::chrono::nanoseconds{t}};
  return p;
}

result<exec_process> python_waiter::serve(const std::string& request) {
  if (ctl_) return serve_forked(request);
  if (p_.pid <= 0) return fail(ec::unavailable, "python waiter already used");
  // The waiter creates the FIFO just before it blocks opening it: a short retry covers a
  // take right after the pool built the guest.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds{500};
  unique_fd fd;
  for (;;) {
    fd.reset(open_fifo(p_.pid));
    if (fd || std::chrono::steady_clock::now() > deadline) break;
    if (errno != ENXIO && errno != ENOENT) break;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  if (!fd)
    return fail(ec::unavailable,
                std::string{"python waiter not listening: "} + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISFIFO(st.st_mode))
    return fail(ec::unavailable, "python waiter's FIFO is not a FIFO");
  int flags = ::fcntl(fd.get(), F_GETFL);
  ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  // Once the waiter has read a request it runs it: from here on the process is the exec's
  // either way (a partial write makes it exit 125).
  const auto handed_over = std::chrono::steady_clock::now(); // the program's run starts here
  bool ok = write_all(fd.get(), request);
  fd.reset();
  if (!ok) return fail(ec::unavailable, "writing to the python waiter failed");
  auto out = p_;
  out.handed_over = handed_over;
  p_ = exec_process{};
  return out;
}

size_t python_waiter::kill_stale(const guest_runtime& g) {
  static const std::string prefix = std::string{"python3"} + '\0' + "-c" + '\0' +
                                    std::string{python_waiter_script}.substr(0, 64);
  size_t killed = 0;
  std::set<pid_t> seen; // v1: the same process is a member in every hierarchy
  for (const auto& dir : g.cgroup_dirs)
    for (pid_t pid : cgroup_pids(dir)) {
      if (pid == g.init_pid || !seen.insert(pid).second) continue;
      // Through a pidfd: the command line read belongs to the process signalled.
      unique_fd pidfd{static_cast<int>(::syscall(SYS_pidfd_open, pid, 0))};
      if (!pidfd) continue;
      std::ifstream in{"/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary};
      std::stringstream ss;
      ss << in.rdbuf();
      if (ss.str().compare(0, prefix.size(), prefix) != 0) continue;
      if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) == 0) ++killed;
    }
  return killed;
}

} // namespace guestflow::local
