// Fork-server pools (on by default, GUESTFLOW_FORK_POOL=0 opts out; guests/fork_template.hpp)
// on real guests: a pool guest is a clone of a template that imported the preload once, and its
// first python3 run is served by its init. Such a guest is fresh (nothing of an earlier guest's
// run: files, environment, module state), isolated from a sibling (pids, files, network), in
// cgroups of its own with its memory limit enforced, and deleted whole; a run's exit status and
// output are right (it is not the server's child: the init reports it); an exec the init does
// not serve gets a clean interpreter; the template survives a guest's crash; a template killed
// while creates run fails none of them (its clones run on; the pool then builds ordinary
// guests, said once) and leaves nothing; a stop leaves no template.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/slurp.hpp"

#include <atomic>
#include <csignal>
#include <functional>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

namespace guestflow::testing {
namespace {

/// Says who ran it ("forked": a clone of the template; "waiter": the python waiter;
/// "plain": python3 itself), then whether json is loaded and what an earlier run may have
/// left.
const std::string probe = R"py(import os, sys
with open("/proc/self/cmdline", "rb") as f:
    code = f.read().split(b"\0")[2]
who = ("forked" if code.startswith(b"# guestflow fork template") else
       "waiter" if code.startswith(b"# guestflow python waiter") else "plain")
json = sys.modules.get("json")
print(who, json is not None, getattr(json, "gf_marker", None), os.environ.get("GF_LEAK"),
      sorted(os.listdir("/workspace")), sorted(os.listdir("/tmp")), sorted(os.listdir("/dev/shm")))
)py";

/// Leaves everything it can behind: a module attribute, an environment variable, files.
const std::string litter = R"py(import os, sys, json
json.gf_marker = "left"
os.environ["GF_LEAK"] = "left"
for d in ("/workspace", "/tmp", "/dev/shm"):
    open(d + "/left", "w").write("x")
print("littered", os.getpid())
sys.stderr.write("to stderr\n")
sys.exit(7)
)py";

class fork_pool_test : public control_plane_test {
protected:
  void start_pool(const std::map<std::string, std::string>& extra = {}) {
    std::map<std::string, std::string> env{{"GUESTFLOW_FORK_POOL", "1"},
                                           {"GUESTFLOW_PRELOAD", "json"}};
    env.insert(extra.begin(), extra.end());
    start({"--warm-pool", "s-1vcpu-256mb=2"}, env);
  }

  bool pool_ready() { return pool_full(2, std::chrono::seconds{90}); }

  sandbox_created take() {
    EXPECT_TRUE(pool_ready()) << call("GET", "/v1/pool").body;
    return create(pool_guest_body);
  }

  void remove(const std::string& id) {
    EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 200u);
  }

  /// The template's cgroup directories (fork_template.cpp's slot ids for this state dir).
  std::vector<std::string> template_cgroups() const {
    char hash[17];
    std::snprintf(hash, sizeof hash, "%08zx",
                  std::hash<std::string>{}(state_dir_.string()) & 0xffffffffu);
    const std::string prefix = std::string{"fork-template-"} + hash + "-";
    std::vector<std::string> out;
    for (const auto& root : std::filesystem::directory_iterator{"/sys/fs/cgroup"}) {
      std::error_code ec;
      auto dir = root.path() / "guestflow";
      if (!std::filesystem::is_directory(dir, ec)) continue;
      for (const auto& d : std::filesystem::directory_iterator{dir, ec})
        if (d.path().filename().string().rfind(prefix, 0) == 0) out.push_back(d.path());
    }
    return out;
  }

  /// python3 -c `program` in guest `id` under coreutils' timeout as the runtime runs it:
  /// TERM after `seconds`, KILL 5 s later.
  exec_result timed_python(const std::string& id, const char* seconds,
                           const std::string& program) {
    return exec(id, "timeout", {"--kill-after=5", seconds, "python3", "-c", program});
  }

  /// Starts the pool and waits for it full: its template's python3 (host pid), or 0 (the
  /// failure said) when the pool did not fill.
  int pooled_template() {
    start_pool();
    if (!pool_ready()) {
      ADD_FAILURE() << "the pool did not fill: " << call("GET", "/v1/pool").body;
      return 0;
    }
    return template_pid();
  }

  /// No template cgroup left (within 10 s) and the fork spool removed.
  void expect_no_template_left() {
    EXPECT_TRUE(template_cgroups_gone());
    EXPECT_TRUE(std::filesystem::is_empty(state_dir_ / "fork")) << "its spool is removed";
  }

  /// Stops the server (cleanly). Whatever a failed test left, the teardown deletes: it
  /// starts the server again on this state dir.
  void stop_server() { EXPECT_EQ(stop(), 0); }

  /// Whether within 10 s no template cgroup of this state dir is left.
  bool template_cgroups_gone() {
    return eventually([&] { return template_cgroups().empty(); }, std::chrono::seconds{10});
  }

  /// Whether within 10 s no clone, keeper or template runs (their command lines name the
  /// spool).
  bool spool_processes_gone() {
    const auto spool = (state_dir_ / "fork").string();
    return eventually(
        [&] {
          return test_support::pids_where(
                     "cmdline",
                     [&](const std::string& c) { return c.find(spool) != std::string::npos; })
              .empty();
        },
        std::chrono::seconds{10});
  }

  /// The template's python3 (host pid): a member of its cgroup whose command is the
  /// template's, not bwrap nor its keeper.
  int template_pid() {
    for (int pid : guest_pids("fork-template-")) {
      auto cmd = test_support::slurp("/proc/" + std::to_string(pid) + "/cmdline");
      auto cg = test_support::slurp("/proc/" + std::to_string(pid) + "/cgroup");
      auto comm = test_support::slurp("/proc/" + std::to_string(pid) + "/comm");
      if (cmd.find("# guestflow fork template") != std::string::npos && comm == "python3\n" &&
          !template_cgroups().empty() &&
          cg.find(std::filesystem::path{template_cgroups().front()}.filename().string()) !=
              std::string::npos)
        return pid;
    }
    return 0;
  }
};

TEST_F(fork_pool_test,
       a_forked_guest_s_first_run_has_its_status_and_output_and_leaves_nothing) {
  start_pool();
  auto a = take();
  auto r = exec(a.id, "python3", {"-c", litter});
  EXPECT_EQ(r.exit_code, 7) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.rfind("littered 2\n", 0), 0u)
      << r.stdout_text << " (pid 2: the init's child)";
  EXPECT_EQ(r.stderr_text, "to stderr\n");
  // The run is not in the guest any more; its litter is, in this guest only.
  auto seen = exec(a.id, "python3", {"-c", probe});
  EXPECT_EQ(seen.stdout_text, "plain False None None ['left'] ['left'] ['left']\n");
  remove(a.id);
  // The next guest is another clone of the same template: none of it.
  for (int i = 0; i < 2; ++i) {
    auto b = take();
    auto fresh = exec(b.id, "python3", {"-c", probe});
    EXPECT_EQ(fresh.exit_code, 0) << fresh.stderr_text;
    EXPECT_EQ(fresh.stdout_text, "forked True None None [] [] []\n");
    remove(b.id);
  }
  // The run's own time (exec_ms): from its request, not from when its process was forked
  // (while the guest waited in the pool), so never more than the request's wall time.
  auto t = take();
  const auto t0 = std::chrono::steady_clock::now();
  auto timed = exec_reply(t.id, "python3", {"-c", "import time; time.sleep(0.3)"});
  const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - t0)
                        .count();
  auto at = timed.body.find(R"("exec_ms":)");
  ASSERT_NE(at, std::string::npos) << timed.body;
  const long exec_ms = std::atol(timed.body.c_str() + at + 10);
  EXPECT_GE(exec_ms, 300) << timed.body;
  EXPECT_LE(exec_ms, wall) << timed.body;
  // A signal's status as waitpid reads it (128 + signal), under the runtime's timeout too.
  auto c = take();
  auto killed = timed_python(c.id, "30",
                             "import os, signal; print('bye', flush=True); "
                             "os.kill(os.getpid(), signal.SIGSEGV)");
  EXPECT_EQ(killed.exit_code, 139) << killed.stderr_text;
  EXPECT_EQ(killed.stdout_text, "bye\n");
}

TEST_F(fork_pool_test,
       a_forked_guest_s_init_is_the_static_init_and_execs_enter_its_namespaces) {
  start_pool();
  // What the first (forked) run and a later exec see: pid 1 and the processes beside them,
  // pid 1's program and capabilities, and their own cgroups (each the root of a cgroup
  // namespace: nothing of the host's hierarchy).
  const std::string look =
      "import os\n"
      "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), os.getpid())\n"
      "print(open('/proc/1/cmdline', 'rb').read())\n"
      "caps = dict(l.split(':\\t') for l in open('/proc/1/status').read().splitlines()\n"
      "            if l.startswith('Cap'))\n"
      "print(sorted(set(caps.values())))\n"
      "print(sorted(set(l.strip().rsplit(':', 1)[1] for l in open('/proc/self/cgroup'))))\n";
  auto a = take();
  auto first = exec(a.id, "python3", {"-c", look});
  EXPECT_EQ(first.exit_code, 0) << first.stderr_text << cp_->stderr_text();
  EXPECT_EQ(first.stdout_text, "[1, 2] 2\n"
                               "b'guestflow-init\\x00fork\\x00'\n"
                               "['0000000000000000']\n"
                               "['/']\n")
      << "the run (pid 2) beside the static init (pid 1), no python3 init"
      << cp_->stderr_text();
  auto later = exec(a.id, "python3", {"-c", look});
  EXPECT_EQ(later.stdout_text.substr(later.stdout_text.find('\n')),
            "\nb'guestflow-init\\x00fork\\x00'\n['0000000000000000']\n['/']\n")
      << later.stderr_text;
  EXPECT_EQ(later.stdout_text.rfind("[1, ", 0), 0u) << later.stdout_text;
  // No capability left in the run either (its bounding set too).
  auto caps = exec(a.id, "python3",
                   {"-c", "print(sorted(set(l.split(':\\t')[1] for l in "
                          "open('/proc/self/status').read().splitlines() "
                          "if l.startswith('Cap') and not l.startswith('CapAmb'))))"});
  EXPECT_EQ(caps.stdout_text, "['0000000000000000']\n");
}

TEST_F(fork_pool_test,
       the_template_s_bounding_set_is_empty_and_each_guest_gets_namespaces_of_its_own) {
  int tpl = pooled_template();
  ASSERT_GT(tpl, 0);
  // The template emptied its bounding set once (its clones and their inits inherit it, and
  // find nothing left to drop) and kept what it clones with.
  std::map<std::string, std::string> caps;
  std::istringstream status{test_support::slurp("/proc/" + std::to_string(tpl) + "/status")};
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cap", 0) == 0) caps[line.substr(0, line.find(':'))] = line.substr(8);
  EXPECT_EQ(caps["CapBnd"], "0000000000000000");
  EXPECT_NE(caps["CapEff"], "0000000000000000");
  // What the thread that made each guest's namespaces gave them: its own /dev/pts (a new
  // instance: no terminal of another guest), lo up, the spool's files out of sight, the
  // guest's hostname; in a second guest made by another thread of the same template too.
  const std::string look = "import glob, os, socket\n"
                           "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
                           "socket.create_connection(s.getsockname(), 2)\n"
                           "print(sorted(os.listdir('/dev/pts')), glob.glob('" +
                           (state_dir_ / "fork").string() + "/*/*'), socket.gethostname())\n";
  for (int i = 0; i < 2; ++i) {
    auto g = take();
    auto r = exec(g.id, "python3", {"-c", look});
    EXPECT_EQ(r.stdout_text, "['ptmx'] [] " + g.id + "\n") << r.stderr_text;
    remove(g.id);
  }
}

TEST_F(fork_pool_test,
       runs_and_a_delete_mid_run_leave_no_process_and_no_zombie_in_the_template) {
  int tpl = pooled_template();
  ASSERT_GT(tpl, 0);
  const auto children = [&] {
    std::istringstream in{test_support::slurp("/proc/" + std::to_string(tpl) + "/task/" +
                                              std::to_string(tpl) + "/children")};
    std::vector<std::string> states;
    for (int pid; in >> pid;) {
      auto stat = test_support::slurp("/proc/" + std::to_string(pid) + "/stat");
      states.push_back(stat.empty() ? "?" : stat.substr(stat.rfind(')') + 2, 1));
    }
    return states;
  };
  for (int i = 0; i < 4; ++i) {
    auto c = take();
    EXPECT_EQ(exec(c.id, "python3", {"-c", "print('ran')"}).stdout_text, "ran\n");
    remove(c.id);
  }
  // A run deleted while it runs: its guest's pid 2 has started its session (serve()).
  auto c = take();
  std::thread run{[&] { exec_reply(c.id, "python3", {"-c", "import time; time.sleep(60)"}); }};
  const auto serving = [&] {
    for (int pid : guest_pids(c.id)) {
      auto status = test_support::slurp("/proc/" + std::to_string(pid) + "/status");
      auto stat = test_support::slurp("/proc/" + std::to_string(pid) + "/stat");
      std::istringstream fields{stat.substr(stat.rfind(')') + 2)};
      std::string state;
      int ppid = 0, pgrp = 0, session = 0;
      fields >> state >> ppid >> pgrp >> session;
      auto at = status.find("NSpid:");
      auto line = at == std::string::npos ? "" : status.substr(at, status.find('\n', at) - at);
      if (line.size() > 2 && line.substr(line.size() - 2) == "\t2" && session == pid)
        return true;
    }
    return false;
  };
  EXPECT_TRUE(eventually(serving, std::chrono::seconds{10}));
  remove(c.id);
  run.join();
  EXPECT_TRUE(eventually([&] { return guest_pids(c.id).empty(); }, std::chrono::seconds{10}));
  // Each ready guest is two children of the template (its init and its run); nothing else,
  // and no zombie: what the deletes ended was reaped.
  ASSERT_TRUE(pool_ready());
  EXPECT_TRUE(eventually([&] { return children() == std::vector<std::string>(4, "S"); },
                         std::chrono::seconds{10}))
      << ::testing::PrintToString(children());
}

TEST_F(fork_pool_test, an_exec_the_init_does_not_serve_gets_a_clean_interpreter) {
  start_pool();
  const auto code = std::string{"import sys; print(sorted(sys.modules))"};
  auto fresh = exec(create(built_guest_body).id, "python3", {"-u", "-c", code});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.stderr_text;
  EXPECT_EQ(fresh.stdout_text.find("'json'"), std::string::npos);
  auto c = take();
  auto r = exec(c.id, "python3", {"-u", "-c", code});
  EXPECT_EQ(r.stdout_text, fresh.stdout_text) << "no preloaded module beyond python's own";
  auto d = take();
  EXPECT_EQ(exec(d.id, "true").exit_code, 0);
  // The process that would have served a run is gone before that exec started.
  EXPECT_EQ(
      exec(d.id, "sh", {"-c", "cd /proc && for p in [0-9]*; do [ $p = $$ ] || echo $p; done"})
          .stdout_text,
      "1\n")
      << "the init only, beside the listing shell";
  EXPECT_EQ(exec(d.id, "python3", {"-u", "-c", code}).stdout_text, fresh.stdout_text);
  // The contrast: a run it serves has the preload.
  auto e = take();
  EXPECT_EQ(exec(e.id, "python3", {"-c", probe}).stdout_text,
            "forked True None None [] [] []\n");
}

TEST_F(fork_pool_test, siblings_see_neither_each_other_s_processes_files_nor_network) {
  start_pool();
  auto a = take();
  auto b = take();
  // a listens on its loopback (a process left running in the guest).
  const std::string listen = "import os, socket, time\n"
                             "s = socket.socket(); s.bind(('127.0.0.1', 8765)); s.listen()\n"
                             "open('/workspace/mine', 'w').write('a')\n"
                             "if os.fork() == 0:\n"
                             "    os.setsid(); time.sleep(120)\n"
                             "print('listening')\n";
  auto l = exec(a.id, "python3", {"-c", listen});
  ASSERT_EQ(l.stdout_text, "listening\n") << l.stderr_text;
  const std::string dial =
      "import socket\n"
      "try:\n"
      "    socket.create_connection(('127.0.0.1', 8765), 2); print('open')\n"
      "except OSError as e:\n"
      "    print('refused', type(e).__name__)\n";
  EXPECT_EQ(exec(a.id, "python3", {"-c", dial}).stdout_text, "open\n");
  EXPECT_EQ(exec(b.id, "python3", {"-c", dial}).stdout_text,
            "refused ConnectionRefusedError\n");
  EXPECT_EQ(exec(b.id, "ls", {"/workspace"}).stdout_text, "");
  const std::string pids = "import os; print(sorted(int(p) for p in os.listdir('/proc') "
                           "if p.isdigit() and int(p) != os.getpid()))";
  EXPECT_EQ(exec(b.id, "python3", {"-c", pids}).stdout_text, "[1]\n")
      << "b's init only: not a's sleeper, nor the template";
  auto in_a = exec(a.id, "python3", {"-c", pids}).stdout_text;
  EXPECT_NE(in_a, "[1]\n") << "a's sleeper is there (the contrast)";
  EXPECT_EQ(exec(a.id, "hostname").stdout_text, a.id + "\n");
  EXPECT_EQ(exec(b.id, "hostname").stdout_text, b.id + "\n");
}

TEST_F(fork_pool_test,
       a_forked_guest_has_its_own_cgroups_its_memory_limit_and_is_deleted_whole) {
  start_pool();
  auto a = take();
  auto pids = guest_pids(a.id);
  ASSERT_FALSE(pids.empty()) << "its init is in cgroups named by its id";
  for (int pid : pids) {
    auto cg = test_support::slurp("/proc/" + std::to_string(pid) + "/cgroup");
    EXPECT_EQ(cg.find("fork-template"), std::string::npos) << cg;
  }
  // 256 MiB: a first (forked) run that allocates 400 is killed, and said so.
  auto hog = exec_reply(a.id, "python3",
                        {"-c", "b = bytearray(400 << 20)\nfor i in range(0, len(b), 4096): "
                               "b[i] = 1\nprint('survived')"});
  EXPECT_NE(hog.body.find("out of memory (memory limit 256 MiB)"), std::string::npos)
      << hog.body;
  EXPECT_NE(hog.body.find(R"("exit_code":137)"), std::string::npos) << hog.body;
  EXPECT_EQ(exec(a.id, "echo", {"still here"}).stdout_text, "still here\n");
  remove(a.id);
  EXPECT_TRUE(eventually([&] { return guest_pids(a.id).empty(); }, std::chrono::seconds{10}));
  for (const auto& root : std::filesystem::directory_iterator{"/sys/fs/cgroup"})
    EXPECT_FALSE(std::filesystem::exists(root.path() / "guestflow" / a.id)) << root.path();
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "guests" / a.id));
  // Its workspace's file system is unmounted everywhere: no loop device backs onto it.
  EXPECT_TRUE(eventually(
      [&] {
        for (const auto& d : std::filesystem::directory_iterator{"/sys/block"})
          if (test_support::slurp(d.path() / "loop" / "backing_file").find(a.id) !=
              std::string::npos)
            return false;
        return true;
      },
      std::chrono::seconds{10}));
}

TEST_F(fork_pool_test, the_template_survives_a_guest_s_crash_and_a_stop_leaves_none) {
  int tpl = pooled_template();
  ASSERT_GT(tpl, 0);
  auto a = take();
  // The guest crashes whole: its init killed (a pid namespace's init takes no other
  // signal from outside); its delete still works.
  auto pids = guest_pids(a.id);
  ASSERT_FALSE(pids.empty());
  for (int pid : pids)
    ::kill(pid, SIGKILL);
  remove(a.id);
  auto b = take();
  EXPECT_EQ(exec(b.id, "python3", {"-c", probe}).stdout_text,
            "forked True None None [] [] []\n");
  EXPECT_EQ(template_pid(), tpl);
  EXPECT_EQ(cp_->stderr_text().find("fork template died"), std::string::npos);
  remove(b.id);
  stop_server();
  expect_no_template_left();
}

TEST_F(fork_pool_test, a_template_killed_while_creates_run_fails_none_and_leaves_nothing) {
  int tpl = pooled_template();
  ASSERT_GT(tpl, 0);
  auto before = take(); // a clone taken before its template dies
  // The template is killed while creates run back to back (the take race): every create
  // answers 200 with a guest that runs, whether it is a clone of the dead template (its
  // keeper holds their sandbox up), a rebuilt ordinary guest, or a fresh one.
  std::atomic<int> done{0};
  std::thread killer{[&] {
    while (done.load() < 2)
      std::this_thread::yield();
    ::kill(tpl, SIGKILL);
  }};
  struct joined { // on every way out, a failed assertion's too
    std::thread& t;
    std::atomic<int>& done;
    ~joined() {
      done.store(1 << 20);
      t.join();
    }
  } join_killer{killer, done};
  std::string last;
  int runs = 0;
  for (int i = 0; i < 40 && (i < 12 || last != "waiter True None None [] [] []\n"); ++i) {
    if (i >= 12) ASSERT_TRUE(pool_ready()) << call("GET", "/v1/pool").body; // then: rebuilt
    auto r = call("POST", "/v1/sandboxes", pool_guest_body);
    ASSERT_EQ(r.status, 200u) << r.body;
    auto c = data<sandbox_created>(r);
    auto p = exec(c.id, "python3", {"-c", probe});
    ASSERT_EQ(p.exit_code, 0) << c.id << ": " << p.stderr_text;
    last = p.stdout_text;
    // Pooled (a clone or a rebuilt guest's waiter: json preloaded), or built on a miss.
    EXPECT_TRUE(last.find(" True None None [] [] []\n") != std::string::npos ||
                last == "plain False None None [] [] []\n")
        << last;
    remove(c.id);
    ++runs;
    done.store(runs);
  }
  EXPECT_EQ(last, "waiter True None None [] [] []\n") << "after " << runs << " creates";
  EXPECT_TRUE(eventually([&] { return ::kill(tpl, 0) != 0; }, std::chrono::seconds{10}));
  // The clone taken before runs on (its sandbox held up by the keeper), and is deleted whole.
  EXPECT_EQ(exec(before.id, "echo", {"still here"}).stdout_text, "still here\n");
  remove(before.id);
  auto log = cp_->stderr_text();
  const std::string said = "its fork template died";
  auto at = log.find(said);
  EXPECT_NE(at, std::string::npos) << log;
  EXPECT_EQ(log.find(said, at + 1), std::string::npos) << log;
  stop_server();
  // Nothing left: no clone, keeper or template, no template cgroup, no spool.
  EXPECT_TRUE(spool_processes_gone());
  expect_no_template_left();
}

TEST_F(fork_pool_test, pool_guests_that_died_waiting_are_never_handed_out) {
  // The template's whole sandbox killed (its outer bwrap): both waiting clones die with it.
  int tpl = pooled_template();
  ASSERT_GT(tpl, 0);
  // This test's template only (other tests' control planes may run templates meanwhile).
  std::vector<int> sandbox;
  for (const auto& dir : template_cgroups()) {
    std::istringstream procs{test_support::slurp(std::filesystem::path{dir} / "cgroup.procs")};
    for (int pid; procs >> pid;)
      if (test_support::slurp("/proc/" + std::to_string(pid) + "/comm") == "bwrap\n")
        sandbox.push_back(pid);
  }
  ASSERT_FALSE(sandbox.empty());
  for (int pid : sandbox)
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(spool_processes_gone());
  // Still listed ready: each take skips them (discarded), and every create gets a live guest.
  for (int i = 0; i < 3; ++i) {
    auto r = call("POST", "/v1/sandboxes", pool_guest_body);
    ASSERT_EQ(r.status, 200u) << r.body;
    auto c = data<sandbox_created>(r);
    created_.push_back(c.id);
    auto p = exec(c.id, "python3", {"-c", probe});
    EXPECT_EQ(p.exit_code, 0) << p.stderr_text;
    EXPECT_EQ(p.stdout_text.rfind("forked", 0), std::string::npos) << p.stdout_text;
  }
}

TEST_F(fork_pool_test, a_taken_clone_outlives_the_server_and_keeps_its_template) {
  start_pool();
  auto a = take();
  EXPECT_EQ(stop(), 0);
  // Pool guests are deleted at stop; a taken one runs on, and with it its template.
  ASSERT_FALSE(guest_pids(a.id).empty());
  EXPECT_FALSE(template_cgroups().empty());
  start_pool();
  EXPECT_EQ(exec(a.id, "echo", {"adopted"}).stdout_text, "adopted\n");
  EXPECT_FALSE(template_cgroups().empty()) << "still needed by a";
  remove(a.id);
  stop_server();
  EXPECT_TRUE(template_cgroups_gone()) << "no clone left: every template ends at stop";
}

TEST_F(fork_pool_test, a_create_that_finds_the_pool_empty_waits_for_a_clone_in_flight) {
  start_pool();
  ASSERT_TRUE(pool_ready()) << call("GET", "/v1/pool").body;
  create(pool_guest_body);
  create(pool_guest_body);
  // The pool is empty, its two clones being built: the next create waits for one (tens of
  // milliseconds) instead of building a guest cold, whose first run would import again.
  auto c = create(pool_guest_body);
  auto pool = call("GET", "/v1/pool").body;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(pool, m, std::regex{R"("takes":(\d+),"misses":(\d+))"}))
      << pool;
  EXPECT_EQ(m[1].str(), "3") << pool;
  EXPECT_EQ(m[2].str(), "0") << pool;
  auto r = exec(c.id, "python3", {"-c", probe});
  EXPECT_EQ(r.stdout_text.rfind("forked True", 0), 0u) << r.stdout_text;
}

TEST_F(fork_pool_test, the_runtime_s_timeout_is_kept_by_the_init_with_no_watcher_between) {
  start_pool();
  const auto listing = [&](const std::string& id) {
    return exec(id, "sh",
                {"-c", "cd /proc && for p in [0-9]*; do [ $p = $$ ] || echo $p; done"})
        .stdout_text;
  };
  // Within the deadline: the program's own status, and the program is pid 2, the template's
  // child (its parent outside the guest: ppid 0): no watcher process between them.
  auto d = take();
  auto ok =
      timed_python(d.id, "60", "import os, sys; print(os.getpid(), os.getppid()); sys.exit(4)");
  EXPECT_EQ(ok.exit_code, 4) << ok.stderr_text;
  EXPECT_EQ(ok.stdout_text, "2 0\n");
  // At the deadline the run and its group (a grandchild too) are TERMed: coreutils' 124,
  // and the guest holds its init only, as a fresh one.
  auto a = take();
  auto hung = timed_python(a.id, "1",
                           "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n"
                           "print('up', flush=True)\ntime.sleep(60)\n");
  EXPECT_EQ(hung.exit_code, 124) << hung.stderr_text;
  EXPECT_EQ(hung.stdout_text, "up\n");
  EXPECT_TRUE(eventually([&] { return listing(a.id) == "1\n"; })) << listing(a.id);
  // One that ignores TERM is KILLed with its group 5 s later: coreutils' 137.
  auto s = take();
  const auto start = std::chrono::steady_clock::now();
  auto stubborn =
      timed_python(s.id, "1",
                   "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                   "time.sleep(60)\n");
  EXPECT_EQ(stubborn.exit_code, 137) << stubborn.stderr_text;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds{6});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds{30});
  EXPECT_TRUE(eventually([&] { return listing(s.id) == "1\n"; })) << listing(s.id);
}

} // namespace
} // namespace guestflow::testing
