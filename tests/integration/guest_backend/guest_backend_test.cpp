// Real guests on the local guest backend: bubblewrap namespaces, cgroups, seccomp, netns
// egress. Each TEST is its own ctest entry with its own state dir.

#include "common/text.hpp"
#include "controlplane/local/guests/cgroups.hpp"
#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/guests/sandbox_launch.hpp"
#include "controlplane/local/guests/seccomp_filter.hpp"
#include "controlplane/local/network/netns_egress.hpp"
#include "tests/integration/guest_backend/test_guest.hpp"
#include "tests/integration/guest_backend/test_network.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/slurp.hpp"

#include <algorithm>
#include <atomic>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

/// Every fork() of this process: the backend is linked into this executable, so its calls
/// bind to this definition before libc's.
static std::atomic<int> fork_calls{0};
extern "C" pid_t fork() {
  static const auto real = reinterpret_cast<pid_t (*)()>(::dlsym(RTLD_NEXT, "fork"));
  ++fork_calls;
  return real();
}

namespace guestflow::local::test {
namespace {

namespace fs = std::filesystem;

using test_support::slurp;

std::string read_fd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    out.append(buf, size_t(n));
  ::close(fd);
  return out;
}

void write_fd(int fd, const std::string& data) {
  ASSERT_EQ(::write(fd, data.data(), data.size()), ssize_t(data.size()));
  ::close(fd);
}

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

/// A backend on a fresh state dir; destroys every guest it made, whatever the test did.
class guest_backend_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "guests need root (cgroups, namespaces)";
    cfg.state_dir = dir.path();
    backend = std::make_unique<guest_backend>(cfg);
  }

  void TearDown() override {
    for (auto& g : made)
      if (backend) backend->destroy(g);
  }

  guest_runtime create(guest_spec spec) {
    auto g = backend->create(spec);
    EXPECT_TRUE(g) << (g ? "" : g.error().message);
    if (!g) return {};
    made.push_back(*g);
    return *g;
  }

  /// Whether the networked cases can run here. A test checks it in its own body: GTEST_SKIP
  /// returns from the function it is written in, so a skip inside a helper would let the
  /// test go on.
  bool network_available() const {
    return network_tests_possible() && backend->support().nftables;
  }

  /// A create whose bwrap fails before exec, or after exec once cgroups (and, with a network,
  /// the netns) exist, leaves none of them behind.
  void failed_creates_leave_nothing(const egress_policy& egress) {
    for (const char* bwrap : {"/nonexistent/bwrap", "/usr/bin/false"}) {
      cfg.bwrap = bwrap;
      backend = std::make_unique<guest_backend>(cfg);
      auto spec = make_spec(256, egress);
      auto g = backend->create(spec);
      ASSERT_FALSE(g) << bwrap;
      EXPECT_EQ(g.error().code, ec::unavailable);
      EXPECT_NE(g.error().message.find("bwrap"), std::string::npos) << g.error().message;
      EXPECT_FALSE(exists((dir.path() / "guests" / spec.id).string()));
      expect_no_cgroups(spec.id);
      EXPECT_FALSE(exists(netns_path(netns_name(spec.id))));
      auto links = run_command({"/usr/sbin/ip", "-o", "link", "show"});
      ASSERT_TRUE(links);
      EXPECT_EQ(links->output.find("link-netns " + netns_name(spec.id)), std::string::npos);
    }
  }

  /// None of the guest's cgroup directories exists, wherever this host's cgroup version
  /// puts them (the paths come from the detected layout, not from a v1 assumption).
  void expect_no_cgroups(const std::string& id) {
    auto layout = detect_cgroups();
    ASSERT_TRUE(layout) << layout.error().message;
    auto dirs = guest_cgroup_dirs(*layout, id);
    ASSERT_FALSE(dirs.empty());
    for (const auto& d : dirs)
      EXPECT_FALSE(exists(d)) << d;
  }

  temp_dir dir{"gf-backend-test"};
  backend_config cfg;
  std::unique_ptr<guest_backend> backend;
  std::vector<guest_runtime> made;
};

TEST_F(guest_backend_test, create_exec_destroy) {
  auto g = create(make_spec());
  ASSERT_GT(g.init_pid, 0);
  EXPECT_TRUE(backend->alive(g));
  EXPECT_FALSE(g.cgroup_dirs.empty());
  EXPECT_TRUE(g.netns.empty()); // deny-all: bwrap's empty netns
  auto r = run(*backend, g, {"echo", "hello", "guest"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello guest\n");

  ASSERT_TRUE(backend->destroy(g));
  // The killed init leaves its cgroup (which destroy() waits for) a moment before it has
  // finished exiting: dead soon, not necessarily at once.
  EXPECT_TRUE(eventually([&] { return !backend->alive(g); }));
  for (const auto& d : g.cgroup_dirs)
    EXPECT_FALSE(exists(d)) << d;
  EXPECT_FALSE(exists(g.workspace.string()));
  EXPECT_FALSE(exists(g.workspace.parent_path().string()));
  EXPECT_TRUE(backend->destroy(g)) << "destroy is idempotent";
  EXPECT_FALSE(backend->start_exec(g, {"true", {}}, {}));
}

TEST_F(guest_backend_test, concurrent_guests_from_many_threads) {
  // The server calls the backend from worker threads: forks race with pipes being created
  // elsewhere. No child may keep another command's pipe open (EOF would never come).
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto g = backend->create(make_spec());
      if (!g) {
        errors[t] = g.error().message;
        return;
      }
      for (int i = 0; i < 5 && errors[t].empty(); ++i) {
        auto r = run(*backend, *g, {"echo", std::to_string(t * 10 + i)}, {}, 5s);
        if (r.timed_out || r.exit_code != 0 || r.out != std::to_string(t * 10 + i) + "\n")
          errors[t] = "run " + std::to_string(i) + ": exit " + std::to_string(r.exit_code) +
                      (r.timed_out ? " (timed out)" : "") + " out=" + r.out + " err=" + r.err;
      }
      if (auto d = backend->destroy(*g); !d) errors[t] = d.error().message;
    });
  for (auto& th : threads)
    th.join();
  for (const auto& e : errors)
    EXPECT_EQ(e, "");
}

TEST_F(guest_backend_test, exit_codes_and_stderr) {
  auto g = create(make_spec());
  auto r = run(*backend, g, {"sh", "-c", "echo out; echo oops >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "oops\n");

  r = run(*backend, g, {"no-such-command-xyz", "arg"});
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(r.err.find("no-such-command-xyz: command not found"), std::string::npos) << r.err;

  r = run(*backend, g, {"/workspace/missing"});
  EXPECT_EQ(r.exit_code, 127);

  r = run(*backend, g, {"/workspace"}); // a directory: not executable
  EXPECT_EQ(r.exit_code, 126);

  r = run(*backend, g, {"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, 137);

  r = run(*backend, g, {"timeout", "--signal=KILL", "0.2", "sleep", "5"});
  EXPECT_EQ(r.exit_code, 137);
}

TEST_F(guest_backend_test, environment_and_working_directory) {
  auto spec = make_spec();
  auto g = create(spec);
  auto r = run(*backend, g, {"env"}, {{"FOO", "bar baz"}, {"PATH", "/usr/bin:/bin"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("FOO=bar baz\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PYTHONUNBUFFERED=1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PATH=/usr/bin:/bin\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HOME=/workspace\n"), std::string::npos) << r.out;

  r = run(*backend, g, {"python3", "-c", "import os; print(os.environ['FOO'], os.getcwd())"},
          {{"FOO", "x"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "x /workspace\n");

  r = run(*backend, g, {"hostname"});
  EXPECT_EQ(r.out, spec.name + "\n");
}

TEST_F(guest_backend_test, runs_as_unprivileged_uid_without_capabilities) {
  auto g = create(make_spec());
  for (const char* who : {"self", "1"}) { // the command, and the sandbox's init
    auto r = run(*backend, g, {"cat", std::string{"/proc/"} + who + "/status"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Uid:\t60000\t60000\t60000\t60000"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Gid:\t60000\t60000\t60000\t60000"), std::string::npos) << r.out;
    for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
      EXPECT_NE(r.out.find(std::string{cap} + ":\t0000000000000000"), std::string::npos)
          << who << " " << cap << "\n"
          << r.out;
    EXPECT_NE(r.out.find("NoNewPrivs:\t1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Seccomp:\t2"), std::string::npos) << r.out;
  }
  auto r = run(*backend, g, {"id", "-u"});
  EXPECT_EQ(r.out, "60000\n");
  // Inside its own pid namespace: the init is pid 1 and host pids are invisible.
  r = run(*backend, g, {"sh", "-c", "echo $$; ls /proc | grep -c '^[0-9]'"});
  std::istringstream in{r.out};
  int own = 0, count = 0;
  in >> own >> count;
  EXPECT_GT(own, 1);
  EXPECT_LT(own, 100);
  EXPECT_LT(count, 10) << "the guest sees only its own processes";
  // The init holds nothing of the host's: only its stdio (no bwrap setup fds).
  pid_t init_cmd = 0;
  for (pid_t pid : cgroup_pids(g.cgroup_dirs.front()))
    if (auto st = read_process_stat(pid); st && st->ppid == g.init_pid) init_cmd = pid;
  ASSERT_GT(init_cmd, 0);
  // The guest init (guest_init.hpp), exec'd by bwrap from its memfd as /proc/self/fd/9.
  EXPECT_EQ(slurp("/proc/" + std::to_string(init_cmd) + "/comm"), "9\n");
  std::vector<std::string> fds;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(init_cmd) + "/fd"))
    fds.push_back(e.path().filename().string());
  std::sort(fds.begin(), fds.end());
  EXPECT_EQ(fds, (std::vector<std::string>{"0", "1", "2"}));
}

/// The process tree and isolation as guest_exec.hpp and sandbox_launch.hpp document them,
/// whichever way the server starts processes: the guest's init is not the server's child
/// (it survives a restart); an exec'd command is (pidfd, reap) and shares every namespace,
/// the cgroups and the root of the init, as the guest uid with no capability, no_new_privs
/// and the seccomp filter.
TEST_F(guest_backend_test, process_tree_and_isolation_of_init_and_commands) {
  auto g = create(make_spec());
  auto init = read_process_stat(g.init_pid);
  ASSERT_TRUE(init);
  auto shim = read_process_stat(init->ppid);
  ASSERT_TRUE(shim);
  EXPECT_EQ(slurp("/proc/" + std::to_string(init->ppid) + "/comm"), "bwrap\n");
  EXPECT_NE(init->ppid, ::getpid()) << "the init is not the server's child";
  EXPECT_NE(shim->ppid, ::getpid()) << "nor is the shim";

  auto p = backend->start_exec(g, {"sleep", {"30"}}, {});
  ASSERT_TRUE(p) << p.error().message;
  const auto cmd = "/proc/" + std::to_string(p->pid);
  auto st = read_process_stat(p->pid);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ppid, ::getpid()) << "an exec'd command is the server's child";
  EXPECT_TRUE(eventually([&] { return slurp(cmd + "/comm") == "sleep\n"; }));
  const auto init_proc = "/proc/" + std::to_string(g.init_pid);
  auto ns = [](const std::string& proc, const char* name) {
    return fs::read_symlink(proc + "/ns/" + name).string();
  };
  for (const char* name : {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup"}) {
    EXPECT_EQ(ns(cmd, name), ns(init_proc, name)) << name;
    EXPECT_NE(ns(cmd, name), ns("/proc/self", name)) << name;
  }
  EXPECT_EQ(fs::read_symlink(cmd + "/root"), fs::read_symlink(init_proc + "/root"));
  EXPECT_EQ(fs::read_symlink(cmd + "/cwd"),
            fs::read_symlink(init_proc + "/root") / "workspace");
  for (const auto& d : g.cgroup_dirs) {
    auto members = cgroup_pids(d);
    EXPECT_NE(std::find(members.begin(), members.end(), p->pid), members.end()) << d;
  }
  const auto status = slurp(cmd + "/status");
  EXPECT_NE(status.find("Uid:\t60000\t60000\t60000\t60000"), std::string::npos) << status;
  EXPECT_NE(status.find("Gid:\t60000\t60000\t60000\t60000"), std::string::npos) << status;
  auto groups = status.substr(status.find("Groups:") + 7);
  EXPECT_EQ(trim(groups.substr(0, groups.find('\n'))), "") << status;
  // No signal of the server's dispositions reaches the command: none ignored or blocked.
  EXPECT_NE(status.find("SigIgn:\t0000000000000000"), std::string::npos) << status;
  EXPECT_NE(status.find("SigBlk:\t0000000000000000"), std::string::npos) << status;
  for (const char* cap : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"})
    EXPECT_NE(status.find(std::string{cap} + ":\t0000000000000000"), std::string::npos) << cap;
  EXPECT_NE(status.find("NoNewPrivs:\t1"), std::string::npos) << status;
  EXPECT_NE(status.find("Seccomp:\t2"), std::string::npos) << status;
  EXPECT_EQ(::getsid(p->pid), p->pid) << "its own session, for kill_exec";
  // Only the three pipes the server reads (no descriptor of the server or its helper) once
  // sleep has started (the loader opens and closes its libraries on the way).
  std::vector<std::string> fds;
  EXPECT_TRUE(eventually([&] {
    fds.clear();
    for (const auto& e : fs::directory_iterator(cmd + "/fd"))
      fds.push_back(e.path().filename().string());
    std::sort(fds.begin(), fds.end());
    return fds == std::vector<std::string>{"0", "1", "2"};
  })) << testing::PrintToString(fds);

  backend->kill_exec(*p);
  EXPECT_EQ(backend->reap(*p), 137);
  ASSERT_TRUE(backend->destroy(g));
}

/// A step of the spawn helper that fails is reported with its own text, as when the server
/// did the steps itself; nothing of the guest is left (fail closed).
TEST_F(guest_backend_test, failed_setup_steps_are_named_and_fail_closed) {
  auto prog = build_guest_seccomp();
  ASSERT_TRUE(prog) << prog.error().message;
  // Joining a cgroup: /dev/full opens for writing, and every write fails (ENOSPC).
  launch_request req;
  req.hostname = "t";
  req.workspace = (dir.path() / "ws").string();
  fs::create_directories(req.workspace);
  req.seccomp = &*prog;
  req.cgroup_procs = {"/dev/full"};
  auto init = launch_guest_init(req);
  ASSERT_FALSE(init);
  EXPECT_EQ(init.error().message,
            "starting the guest failed: joining the guest's cgroups: No space left on device");

  // A command whose cgroup cannot be joined never runs.
  auto g = create(make_spec());
  exec_setup setup;
  setup.cgroup_procs = {"/dev/full"};
  setup.seccomp = &*prog;
  auto p = spawn_in_guest(g, {"true", {}}, {}, setup);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "cannot run the command in the sandbox: joining the guest's "
                               "cgroups: No space left on device");

  // A server that is a child subreaper would keep the shim as its child (and kill the guest
  // when it exits): refused, and the create leaves nothing.
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  auto spec = make_spec();
  auto refused = backend->create(spec);
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("child subreaper"), std::string::npos)
      << refused.error().message;
  expect_no_cgroups(spec.id);
  EXPECT_FALSE(exists((dir.path() / "guests" / spec.id).string()));
  // The shim that refused became our child: reap it.
  EXPECT_TRUE(eventually([] { return ::waitpid(-1, nullptr, WNOHANG) > 0; }));
}

/// This process's children (zombies included).
size_t children() {
  const auto parent = " " + std::to_string(::getpid()) + " ";
  return test_support::pids_where("stat",
                                  [&](const std::string& stat) {
                                    auto at = stat.rfind(')');
                                    return at != std::string::npos &&
                                           stat.compare(at + 3, parent.size(), parent) == 0;
                                  })
      .size();
}

/// An exec's run is what its exit watcher on the host measured (spawn_helper/protocol.hpp),
/// not when the server got round to it, and the watcher is reaped with the command; a spawn
/// that fails leaves no watcher behind.
TEST_F(guest_backend_test, an_execs_exit_watcher_times_it_and_is_reaped_with_it) {
  auto g = create(make_spec());
  const auto before = children();
  auto p = backend->start_exec(g, {"sleep", {"0.5"}}, {});
  ASSERT_TRUE(p) << p.error().message;
  const pid_t watcher = p->watcher;
  EXPECT_GT(watcher, 0);
  pollfd exit{p->pidfd, POLLIN, 0};
  ASSERT_EQ(::poll(&exit, 1, 10'000), 1) << "sleep 0.5 did not end";
  const auto exited = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(exited + 1500ms); // the fault: a server late to reap
  EXPECT_EQ(backend->reap(*p), 0);
  ASSERT_TRUE(p->ran) << "the watcher measured nothing";
  EXPECT_GE(*p->ran, 500ms);
  EXPECT_LT(*p->ran, 1500ms) << "the late reap counted as the command's time";
  EXPECT_EQ(p->watcher, 0);
  EXPECT_EQ(p->timing_fd, -1);
  errno = 0;
  EXPECT_EQ(::waitpid(watcher, nullptr, WNOHANG), -1) << "the watcher was not reaped";
  EXPECT_EQ(errno, ECHILD);
  EXPECT_EQ(children(), before);

  // A process handed its command after it started (the python waiter) counts from then.
  p = backend->start_exec(g, {"sleep", {"1"}}, {});
  ASSERT_TRUE(p) << p.error().message;
  p->handed_over = std::chrono::steady_clock::now() + 400ms;
  EXPECT_EQ(backend->reap(*p), 0);
  ASSERT_TRUE(p->ran);
  EXPECT_GE(*p->ran, 400ms);
  EXPECT_LT(*p->ran, 900ms);

  // A command whose cgroup cannot be joined: its watcher is gone with the failed spawn.
  auto prog = build_guest_seccomp();
  ASSERT_TRUE(prog) << prog.error().message;
  exec_setup setup;
  setup.cgroup_procs = {"/dev/full"};
  setup.seccomp = &*prog;
  ASSERT_FALSE(spawn_in_guest(g, {"true", {}}, {}, setup));
  EXPECT_EQ(children(), before);
}

/// The server is big and multi-threaded: creating, running commands in, networking and
/// destroying guests never fork() it (a copy of its address space per process).
TEST_F(guest_backend_test, the_server_never_forks) {
  const int before = fork_calls;
  pid_t probe = ::fork(); // the counter sees what this executable calls
  if (probe == 0) ::_exit(0);
  ASSERT_GT(probe, 0);
  ::waitpid(probe, nullptr, 0);
  ASSERT_EQ(fork_calls, before + 1);

  auto g = create(make_spec());
  auto r = run(*backend, g, {"sh", "-c", "echo hi"});
  EXPECT_EQ(r.out, "hi\n") << r.err;
  ASSERT_TRUE(backend->pause(g));
  ASSERT_TRUE(backend->resume(g));
  ASSERT_TRUE(backend->destroy(g));
  if (network_tests_possible() && backend->support().nftables) { // host tools: ip, nft
    auto net = create(make_spec(256, egress_policy::allow_all()));
    EXPECT_FALSE(net.ip.empty());
    ASSERT_TRUE(backend->destroy(net));
  }
  EXPECT_EQ(fork_calls, before + 1);
}

TEST_F(guest_backend_test, files_round_trip) {
  auto g = create(make_spec());
  auto w = backend->open_file(g, "/workspace/sub/dir/a.txt", true);
  ASSERT_TRUE(w) << w.error().message;
  write_fd(*w, "from the host\n");
  auto r = run(*backend, g, {"cat", "/workspace/sub/dir/a.txt"});
  EXPECT_EQ(r.out, "from the host\n");
  r = run(*backend, g, {"stat", "-c", "%u:%g", "/workspace/sub", "/workspace/sub/dir/a.txt"});
  EXPECT_EQ(r.out, "60000:60000\n60000:60000\n");

  r = run(*backend, g,
          {"sh", "-c",
           "printf 'from the guest' > /workspace/b.txt; "
           "printf tmp > /tmp/c.txt"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rd = backend->open_file(g, "/workspace/b.txt", false);
  ASSERT_TRUE(rd) << rd.error().message;
  EXPECT_EQ(read_fd(*rd), "from the guest");
  rd = backend->open_file(g, "/tmp/c.txt", false); // the guest's private /tmp
  ASSERT_TRUE(rd) << rd.error().message;
  EXPECT_EQ(read_fd(*rd), "tmp");

  // Overwrite truncates.
  w = backend->open_file(g, "/workspace/b.txt", true);
  ASSERT_TRUE(w);
  write_fd(*w, "x");
  r = run(*backend, g, {"cat", "/workspace/b.txt"});
  EXPECT_EQ(r.out, "x");
}

TEST_F(guest_backend_test, files_refuse_escapes) {
  auto g = create(make_spec());
  // A host file outside the guest, and symlinks inside the guest that point at it.
  const auto secret = dir.path() / "host-secret.txt";
  std::ofstream{secret} << "host secret";
  auto r = run(*backend, g,
               {"sh", "-c",
                "ln -s " + secret.string() +
                    " /workspace/abs && "
                    "ln -s ../../../../../../../.. /workspace/up && "
                    "ln -s " +
                    dir.path().string() +
                    " /workspace/outdir && "
                    "ln -s /proc/self/root /workspace/magic && "
                    "ln -s /nonexistent/x /workspace/dangling && mkdir /workspace/d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  auto code = [&](const std::string& path, bool write) {
    auto f = backend->open_file(g, path, write);
    if (f) {
      auto content = write ? std::string{} : read_fd(*f);
      if (write) ::close(*f);
      ADD_FAILURE() << path << " opened (" << content << ")";
      return ec::guest_failed;
    }
    return f.error().code;
  };
  EXPECT_EQ(code("workspace/a", false), ec::bad_request);              // relative
  EXPECT_EQ(code("/workspace/../etc/passwd", false), ec::bad_request); // ..
  EXPECT_EQ(code("/workspace/./a", true), ec::bad_request);
  EXPECT_EQ(code(std::string{"/workspace/a\0b", 14}, true), ec::bad_request); // NUL
  EXPECT_EQ(code("/", false), ec::bad_request);
  EXPECT_EQ(code("/workspace/missing", false), ec::not_found);
  // Symlinks resolve inside the guest's root: the host file is simply not there.
  EXPECT_EQ(code("/workspace/abs", false), ec::not_found);
  EXPECT_EQ(code("/workspace/up" + secret.string(), false), ec::not_found);
  // /proc/self names no process of the guest for the host's reader; /proc/1/root is a
  // magic link (refused by RESOLVE_NO_MAGICLINKS).
  auto magic = code("/workspace/magic/etc/passwd", false);
  EXPECT_TRUE(magic == ec::bad_request || magic == ec::not_found);
  EXPECT_EQ(code("/proc/1/root/etc/passwd", false), ec::bad_request);
  EXPECT_EQ(code("/proc/1/cwd/x", true), ec::bad_request);
  EXPECT_EQ(code("/workspace/dangling", true), ec::bad_request);
  // Not plain files: directories, devices, procfs.
  EXPECT_EQ(code("/workspace/d", false), ec::bad_request);
  EXPECT_EQ(code("/dev/zero", false), ec::bad_request);
  EXPECT_EQ(code("/proc/1/environ", false), ec::bad_request);
  EXPECT_EQ(code("/usr/bin/python3", true), ec::bad_request); // read-only mount
  EXPECT_EQ(code("/usr/new-dir/file", true), ec::bad_request);

  // Writes through a symlink that points out of the guest land inside it.
  auto w = backend->open_file(g, "/workspace/outdir/pwned", true);
  if (w) write_fd(*w, "x");
  EXPECT_FALSE(exists((dir.path() / "pwned").string())) << "a write escaped the guest";
  EXPECT_EQ(slurp(secret.string()), "host secret");
}

TEST_F(guest_backend_test, memory_limit_oom_kills) {
  auto g = create(make_spec(64));
  EXPECT_EQ(backend->oom_kills(g), 0U);
  auto r = run(*backend, g, {"python3", "-c", "x = b'a' * (200 << 20); print(len(x))"});
  EXPECT_EQ(r.exit_code, 137) << r.out << r.err;
  EXPECT_GT(backend->oom_kills(g), 0U);
  EXPECT_TRUE(backend->alive(g)) << "the guest survives its command's OOM";
  r = run(*backend, g, {"true"});
  EXPECT_EQ(r.exit_code, 0);
}

TEST_F(guest_backend_test, fork_bomb_contained_and_killed) {
  cfg.pids_max = 64;
  backend = std::make_unique<guest_backend>(cfg);
  auto g = create(make_spec(256));
  const auto marker = unique_token("bomb-");
  // bash, not sh: at the limit sh exits on a failed fork (the bomb could die out before the
  // test looks), bash retries. The command forks once, before the bomb fills the limit, then
  // execs sleep (a later fork of its own could fail).
  auto p = backend->start_exec(
      g, {"bash", {"-c", "f() { f | f & }; f & exec sleep 1000", marker}}, {});
  ASSERT_TRUE(p) << p.error().message;
  std::string pids_dir;
  for (const auto& d : g.cgroup_dirs)
    if (exists(d + "/pids.max")) pids_dir = d;
  ASSERT_FALSE(pids_dir.empty());
  // Contained: the bomb runs into pids.max (fork fails) and never exceeds it.
  EXPECT_TRUE(eventually([&] { return std::stoull(slurp(pids_dir + "/pids.current")) >= 60; }))
      << slurp(pids_dir + "/pids.current");
  EXPECT_LE(std::stoull(slurp(pids_dir + "/pids.current")), 64U);
  EXPECT_FALSE(pids_with_marker(marker).empty());

  ASSERT_TRUE(backend->destroy(g));
  EXPECT_EQ(backend->reap(*p), 137);
  EXPECT_TRUE(pids_with_marker(marker).empty());
  for (const auto& d : g.cgroup_dirs)
    EXPECT_FALSE(exists(d));
}

TEST_F(guest_backend_test, double_forked_daemon_gone_after_destroy) {
  auto g = create(make_spec());
  const auto marker = unique_token("daemon-");
  const char* code = R"(import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        fd = os.open("/dev/null", os.O_RDWR)
        for i in (0, 1, 2):
            os.dup2(fd, i)
        time.sleep(1000)
    os._exit(0)
os.wait()
print("parent done")
)";
  auto r = run(*backend, g, {"python3", "-c", code, marker});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "parent done\n");
  std::vector<pid_t> daemons;
  ASSERT_TRUE(eventually([&] { return !(daemons = pids_with_marker(marker)).empty(); }));
  // It lives in the guest's cgroups, reparented to the sandbox's init.
  std::string freezer;
  for (const auto& d : g.cgroup_dirs)
    if (exists(d + "/cgroup.procs")) {
      auto in = cgroup_pids(d);
      EXPECT_NE(std::find(in.begin(), in.end(), daemons[0]), in.end()) << d;
    }
  auto st = read_process_stat(daemons[0]);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->ppid, g.init_pid);

  ASSERT_TRUE(backend->destroy(g));
  EXPECT_TRUE(pids_with_marker(marker).empty());
  for (const auto& d : g.cgroup_dirs)
    EXPECT_FALSE(exists(d));
}

TEST_F(guest_backend_test, destroy_of_a_runtime_naming_only_the_id_removes_the_guest) {
  // What a control plane that stopped mid-create has recorded: the id, nothing else. The
  // guest may be fully built by then; destroy must still find and remove all of it.
  auto spec = make_spec();
  auto g = create(spec);
  ASSERT_FALSE(g.cgroup_dirs.empty());
  ASSERT_TRUE(backend->alive(g));
  guest_runtime recorded;
  recorded.id = g.id;
  ASSERT_TRUE(backend->destroy(recorded));
  EXPECT_TRUE(eventually([&] { return !backend->alive(g); }));
  expect_no_cgroups(spec.id);
  EXPECT_FALSE(exists((dir.path() / "guests" / spec.id).string()));
  // Idempotent: nothing left to remove is not a failure.
  EXPECT_TRUE(backend->destroy(recorded));
}

// A delete reads only the first hierarchy's members and then removes the directories: one
// that refuses because it still holds a process (here one that joined the last hierarchy
// only) has that process killed and every directory removed all the same.
TEST_F(guest_backend_test, a_delete_kills_a_member_of_a_later_hierarchy_only) {
  auto layout = detect_cgroups();
  ASSERT_TRUE(layout) << layout.error().message;
  const auto id = unique_token("t");
  auto dirs = create_guest_cgroups(*layout, id, {64u << 20, 16, 1});
  ASSERT_TRUE(dirs) << dirs.error().message;
  pid_t pid = 0;
  char arg0[] = "sleep", arg1[] = "60";
  char* argv[] = {arg0, arg1, nullptr};
  ASSERT_EQ(::posix_spawn(&pid, "/bin/sleep", nullptr, nullptr, argv, environ), 0);
  {
    std::ofstream procs{dirs->back() + "/cgroup.procs"};
    procs << pid << std::flush;
    ASSERT_TRUE(procs.good());
  }
  auto in = cgroup_pids(dirs->back());
  ASSERT_NE(std::find(in.begin(), in.end(), pid), in.end());
  ASSERT_TRUE(kill_and_remove(*dirs, std::chrono::seconds(10)));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  expect_no_cgroups(id);
  EXPECT_TRUE(kill_and_remove(*dirs, std::chrono::seconds(1))) << "idempotent";
}

TEST_F(guest_backend_test, kill_exec_kills_the_commands_tree) {
  auto g = create(make_spec());
  const auto marker = unique_token("tree-");
  auto p = backend->start_exec(
      g, {"sh", {"-c", "(sleep 1000; :) & (sleep 1000; :) & echo started; wait", marker}}, {});
  ASSERT_TRUE(p);
  std::string out;
  ASSERT_TRUE(eventually([&] {
    read_for(p->stdout_fd, out, 0ms);
    return out == "started\n" && pids_with_marker(marker).size() >= 3;
  }));
  backend->kill_exec(*p);
  EXPECT_EQ(backend->reap(*p), 137);
  EXPECT_TRUE(eventually([&] { return pids_with_marker(marker).empty(); }));
  EXPECT_TRUE(backend->alive(g));
}

TEST_F(guest_backend_test, pause_freezes_and_resume_continues) {
  auto g = create(make_spec());
  auto p = backend->start_exec(
      g,
      {"python3",
       {"-c", "import time\nfor i in range(100000):\n  print(i)\n  time.sleep(0.01)"}},
      {});
  ASSERT_TRUE(p) << p.error().message;
  std::string out;
  ASSERT_TRUE(eventually([&] {
    read_for(p->stdout_fd, out, 0ms);
    return out.size() > 10;
  }));
  ASSERT_TRUE(backend->pause(g));
  auto blocked = backend->start_exec(g, {"true", {}}, {});
  ASSERT_FALSE(blocked);
  EXPECT_EQ(blocked.error().code, ec::paused);
  read_for(p->stdout_fd, out, 50ms); // whatever was in flight
  const auto frozen_at = out.size();
  read_for(p->stdout_fd, out, 300ms); // a frozen command prints nothing
  EXPECT_EQ(out.size(), frozen_at);
  ASSERT_TRUE(backend->resume(g));
  EXPECT_TRUE(eventually([&] {
    read_for(p->stdout_fd, out, 0ms);
    return out.size() > frozen_at;
  }));
  backend->kill_exec(*p);
  EXPECT_EQ(backend->reap(*p), 137);
  auto r = run(*backend, g, {"true"});
  EXPECT_EQ(r.exit_code, 0);

  // A paused guest is destroyed completely too (SIGKILL waits for the thaw).
  p = backend->start_exec(g, {"sleep", {"1000"}}, {});
  ASSERT_TRUE(p);
  ASSERT_TRUE(backend->pause(g));
  ASSERT_TRUE(backend->destroy(g));
  EXPECT_EQ(backend->reap(*p), 137);
  for (const auto& d : g.cgroup_dirs)
    EXPECT_FALSE(exists(d));
}

TEST_F(guest_backend_test, seccomp_blocks_namespace_and_kernel_surface) {
  auto g = create(make_spec());
  const char* code = R"(import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = libc.syscall(*args)
    print(name, "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
call("unshare", 272, 0x10000000)      # unshare(CLONE_NEWUSER)
call("keyctl", 250, 0, -3, 0)          # keyctl(GET_KEYRING_ID, SESSION)
call("io_uring_setup", 425, 1, 0)
call("ptrace", 101, 0, 0, 0, 0)        # PTRACE_TRACEME
call("clone_newuser", 56, 0x10000000 | 17, 0, 0, 0, 0)
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
    print("netlink ok")
except OSError as e:
    print("netlink", errno.errorcode[e.errno])
)";
  auto r = run(*backend, g, {"python3", "-c", code});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "unshare EPERM\nkeyctl EPERM\nio_uring_setup EPERM\nptrace EPERM\n"
                   "clone_newuser EPERM\nnetlink EPERM\n");
  r = run(*backend, g, {"unshare", "--user", "true"});
  EXPECT_NE(r.exit_code, 0);
}

TEST_F(guest_backend_test, guest_survives_its_creators_death) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  auto spec = make_spec();
  pid_t creator = ::fork();
  ASSERT_GE(creator, 0);
  if (creator == 0) {
    ::close(p[0]);
    guest_backend b{cfg};
    auto g = b.create(spec);
    std::ostringstream o;
    if (g) {
      o << g->init_pid << " " << g->init_start_time << " " << g->workspace.string();
      for (const auto& d : g->cgroup_dirs)
        o << " " << d;
    }
    auto s = o.str();
    [[maybe_unused]] auto n = ::write(p[1], s.data(), s.size());
    ::_exit(g ? 0 : 1);
  }
  ::close(p[1]);
  auto text = read_fd(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(creator, &status, 0), creator);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;
  guest_runtime g;
  g.id = spec.id;
  std::istringstream in{text};
  std::string ws, d;
  in >> g.init_pid >> g.init_start_time >> ws;
  g.workspace = ws;
  while (in >> d)
    g.cgroup_dirs.push_back(d);
  made.push_back(g);

  EXPECT_TRUE(backend->alive(g));
  auto r = run(*backend, g, {"echo", "still here"});
  EXPECT_EQ(r.out, "still here\n");
  // The shim (bwrap's outer process) is not a child of the dead creator.
  auto init = read_process_stat(g.init_pid);
  ASSERT_TRUE(init);
  auto shim = read_process_stat(init->ppid);
  ASSERT_TRUE(shim);
  EXPECT_NE(shim->ppid, creator);
  EXPECT_NE(shim->ppid, ::getpid());
  EXPECT_TRUE(backend->alive(g));

  auto wrong = g;
  ++wrong.init_start_time;
  EXPECT_FALSE(backend->alive(wrong)) << "a reused pid is not the guest";
  ASSERT_TRUE(backend->destroy(g));
  EXPECT_TRUE(eventually([&] { return !backend->alive(g); }));
}

TEST_F(guest_backend_test, refuses_what_it_cannot_build_and_leaves_nothing) {
  auto spec = make_spec();
  spec.rootfs = "alpine:3";
  auto g = backend->create(spec);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, ec::bad_request);
  spec = make_spec();
  spec.id = "../escape";
  g = backend->create(spec);
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, ec::bad_request);
  EXPECT_FALSE(exists((dir.path() / "guests").string()) &&
               !fs::is_empty(dir.path() / "guests"));

  // A record naming someone else's resources is refused, not acted upon.
  guest_runtime foreign;
  foreign.id = "t-foreign";
  foreign.cgroup_dirs = {"/sys/fs/cgroup/memory/process_api"};
  auto d = backend->destroy(foreign);
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().code, ec::bad_request);
}

TEST_F(guest_backend_test, failed_create_removes_everything_it_made) {
  failed_creates_leave_nothing(egress_policy::deny_all());
}

TEST_F(guest_backend_test, failed_create_with_a_network_removes_its_namespace_too) {
  // The allow-all half (a netns exists when bwrap fails): skipped, saying why, where it
  // cannot run — never passed silently.
  if (!network_available())
    GTEST_SKIP() << "needs root, /usr/sbin/ip and a working nft to make a guest network";
  failed_creates_leave_nothing(egress_policy::allow_all());
}

TEST_F(guest_backend_test, egress_rules_fail_closed_without_nftables) {
  cfg.nft = "/nonexistent/nft";
  backend = std::make_unique<guest_backend>(cfg);
  EXPECT_FALSE(backend->support().nftables);
  for (auto egress : {egress_policy::allow_all(), *parse_egress({"10.250.0.1"})}) {
    auto spec = make_spec(256, egress);
    auto g = backend->create(spec);
    ASSERT_FALSE(g);
    EXPECT_EQ(g.error().code, ec::unavailable) << g.error().message;
    EXPECT_FALSE(exists(netns_path(netns_name(spec.id))));
    EXPECT_FALSE(exists((dir.path() / "guests" / spec.id).string()));
    expect_no_cgroups(spec.id);
  }
  auto g = create(make_spec()); // deny-all needs no rules
  EXPECT_EQ(run(*backend, g, {"true"}).exit_code, 0);
}

TEST_F(guest_backend_test, deny_all_guest_has_no_network) {
  auto host = tcp_server::on("127.0.0.1", "host");
  ASSERT_TRUE(host);
  auto g = create(make_spec());
  EXPECT_EQ(probe(*backend, g, "127.0.0.1", host->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(host->accepted(), 0);
  auto r = run(*backend, g, {"cat", "/proc/net/dev"});
  EXPECT_EQ(r.out.find("eth"), std::string::npos) << r.out; // only lo
  EXPECT_NE(r.out.find("lo:"), std::string::npos) << r.out;
  auto widen = backend->set_egress(g, egress_policy::allow_all());
  ASSERT_FALSE(widen);
  EXPECT_EQ(widen.error().code, ec::bad_request);
  EXPECT_TRUE(backend->set_egress(g, egress_policy::deny_all()));
}

TEST_F(guest_backend_test, allow_all_guest_cannot_reach_the_host_or_link_local) {
  if (!network_available()) GTEST_SKIP() << "nftables/ip unavailable";
  auto loopback = tcp_server::on("127.0.0.1", "host");
  ASSERT_TRUE(loopback);
  auto net = test_netns::make();
  ASSERT_TRUE(net);
  auto outside = net->serve(net->addr_a, "outside");
  ASSERT_TRUE(outside);
  auto g = create(make_spec(256, egress_policy::allow_all()));
  ASSERT_FALSE(g.ip.empty());
  EXPECT_EQ(g.netns, netns_name(g.id));
  // The host side of the guest's own veth, with a listener the test puts there.
  auto gw = g.ip.substr(0, g.ip.rfind('.') + 1) +
            std::to_string(std::stoi(g.ip.substr(g.ip.rfind('.') + 1)) - 1);
  auto gateway = tcp_server::on(gw, "gateway");
  ASSERT_TRUE(gateway);

  // The test's namespace is a network the host routes to (10.250/16): not the internet, so
  // an allow-all guest is refused it (netns_egress.hpp); a rule naming it reaches it.
  auto lan = probe(*backend, g, net->addr_a, outside->port());
  EXPECT_EQ(lan.rfind("FAIL", 0), 0U) << lan;
  EXPECT_EQ(lan.find("timeout"), std::string::npos) << "rejected by a rule, not lost: " << lan;
  EXPECT_EQ(outside->accepted(), 0);
  auto named = parse_egress({net->addr_a});
  ASSERT_TRUE(named);
  ASSERT_TRUE(backend->set_egress(g, *named));
  EXPECT_EQ(probe(*backend, g, net->addr_a, outside->port()), "OK outside"); // it has network
  ASSERT_TRUE(backend->set_egress(g, egress_policy::allow_all()));
  EXPECT_EQ(probe(*backend, g, "127.0.0.1", loopback->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(probe(*backend, g, gw, gateway->port()).rfind("FAIL", 0), 0U);
  // Another host address (not in the guest's blocked ranges): refused by the host table.
  auto host_side = tcp_server::on(net->host_ip, "host-side");
  ASSERT_TRUE(host_side);
  auto host_addr = probe(*backend, g, net->host_ip, host_side->port());
  EXPECT_EQ(host_addr.rfind("FAIL", 0), 0U) << host_addr;
  EXPECT_EQ(host_addr.find("timeout"), std::string::npos) << host_addr;
  EXPECT_EQ(host_side->accepted(), 0);

  EXPECT_EQ(loopback->accepted(), 0);
  EXPECT_EQ(gateway->accepted(), 0);
  auto meta = probe(*backend, g, "169.254.169.254", 80);
  EXPECT_EQ(meta.rfind("FAIL", 0), 0U) << meta;
  EXPECT_EQ(meta.find("timeout"), std::string::npos)
      << "rejected by a rule, not lost: " << meta;
  auto r = run(*backend, g, {"cat", "/proc/net/if_inet6"});
  EXPECT_EQ(r.out, "") << "no IPv6 in the guest";
}

TEST_F(guest_backend_test, rules_allow_only_the_listed_address) {
  if (!network_available()) GTEST_SKIP() << "nftables/ip unavailable";
  auto net = test_netns::make();
  ASSERT_TRUE(net);
  auto a = net->serve(net->addr_a, "a");
  auto b = net->serve(net->addr_b, "b");
  ASSERT_TRUE(a && b);
  auto rules = parse_egress({net->addr_a});
  ASSERT_TRUE(rules);
  auto g = create(make_spec(256, *rules));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()), "OK a");
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(b->accepted(), 0);

  // A port rule: only that port of that address.
  auto port_rule = parse_egress({net->addr_b + ":" + std::to_string(b->port())});
  ASSERT_TRUE(port_rule);
  auto h = create(make_spec(256, *port_rule));
  EXPECT_EQ(probe(*backend, h, net->addr_b, b->port()), "OK b");
  EXPECT_EQ(probe(*backend, h, net->addr_a, a->port()).rfind("FAIL", 0), 0U);

  // The guest cannot loosen its own rules: no capabilities over the netns.
  auto r = run(*backend, g, {"nft", "flush", "ruleset"});
  EXPECT_NE(r.exit_code, 0);
  r = run(*backend, g, {"ip", "route", "del", "default"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()), "OK a");
}

TEST_F(guest_backend_test, set_egress_changes_reachability) {
  if (!network_available()) GTEST_SKIP() << "nftables/ip unavailable";
  auto net = test_netns::make();
  ASSERT_TRUE(net);
  auto a = net->serve(net->addr_a, "a");
  auto b = net->serve(net->addr_b, "b");
  ASSERT_TRUE(a && b);
  auto g = create(make_spec(256, *parse_egress({net->addr_a})));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()), "OK a");
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()).rfind("FAIL", 0), 0U);

  ASSERT_TRUE(backend->set_egress(g, *parse_egress({net->addr_b})));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()), "OK b");

  ASSERT_TRUE(backend->set_egress(g, *parse_egress({net->addr_a, net->addr_b})));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()), "OK a");
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()), "OK b");

  // Allow-all is the internet: the host's networks (the test's namespace) are refused.
  ASSERT_TRUE(backend->set_egress(g, egress_policy::allow_all()));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()).rfind("FAIL", 0), 0U);

  ASSERT_TRUE(backend->set_egress(g, egress_policy::deny_all()));
  EXPECT_EQ(probe(*backend, g, net->addr_a, a->port()).rfind("FAIL", 0), 0U);
  EXPECT_EQ(probe(*backend, g, net->addr_b, b->port()).rfind("FAIL", 0), 0U);

  auto v6 = parse_egress({"2001:db8::1"});
  ASSERT_TRUE(v6);
  auto refused = backend->set_egress(g, *v6);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ec::bad_request);

  ASSERT_TRUE(backend->destroy(g));
  EXPECT_FALSE(exists(netns_path(g.netns)));
  // The host side of the veth goes with the namespace (the kernel removes the pair).
  auto last = std::stoi(g.ip.substr(g.ip.rfind('.') + 1));
  auto third = std::stoi(g.ip.substr(g.ip.find('.', 3) + 1));
  auto host_if = "/sys/class/net/gfv" + std::to_string((third * 256 + last) >> 2);
  EXPECT_TRUE(eventually([&] { return !exists(host_if); })) << host_if;
}

} // namespace
} // namespace guestflow::local::test
