// The warm pool's python waiter on real guests: a pooled guest's first `python3 FILE` or
// `python3 -c CODE` (or either under the runtime's `timeout --kill-after=5 N`) is served by
// the python3 the pool started ahead, and behaves exactly as the command would (output,
// status, argv, env, cwd, tracebacks, the timeout's kill); any other first exec never sees
// it; a delete leaves nothing; guests built on demand, and a pool with
// GUESTFLOW_POOL_PYTHON=0, are unchanged. With a preload (GUESTFLOW_PRELOAD, debian:12's)
// the waiter imports it first: a module that fails is logged once and left out, what a
// module prints never reaches the run, an exec the waiter does not serve gets a clean
// interpreter, and the runner's engine (guestflow:runner) runs a flow as a fresh guest does.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/slurp.hpp"

#include <dirent.h>
#include <fstream>
#include <signal.h>

namespace guestflow::testing {
namespace {

/// Prints what the program sees of itself; exits with argv[1] if it is a number, raises
/// if it is "raise", forks a sleeping grandchild and sleeps if it is "hang" (ignoring TERM
/// if it is "stubborn").
const std::string program = R"py(import os, sys
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read().split(b"\0")
print("started as", cmdline[0].decode(), cmdline[1][:30].decode())
print("argv", sys.argv)
print("env", os.environ.get("GREETING"), os.environ.get("PYTHONUNBUFFERED"))
print("cwd", os.getcwd(), "path0", sys.path[0], "name", __name__, "file", __file__)
print("to stderr", file=sys.stderr)
def fail():
    raise ValueError("deliberate")
what = sys.argv[1] if len(sys.argv) > 1 else ""
if what == "raise":
    fail()
if what in ("hang", "stubborn"):
    if what == "stubborn":
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", "300"])
    import time
    time.sleep(300)
sys.exit(int(what) if what.isdigit() else 0)
)py";

/// The first line the program prints: how its process was started.
std::string started_as(const exec_result& r) {
  return r.stdout_text.substr(0, r.stdout_text.find('\n'));
}

const std::string served_by_waiter = "started as python3 -c";
const std::string started_plainly = "started as python3 /workspace/prog.py";

/// Children of `pid` (every thread's) that are zombies: exited, never reaped.
std::vector<std::string> zombie_children(pid_t pid) {
  std::vector<std::string> out;
  auto task = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& t : std::filesystem::directory_iterator(task)) {
    std::ifstream in{t.path() / "children"};
    int child = 0;
    while (in >> child) {
      auto s = test_support::slurp("/proc/" + std::to_string(child) + "/stat");
      auto close = s.rfind(')');
      if (close != std::string::npos && s.size() > close + 2 && s[close + 2] == 'Z')
        out.push_back(s);
    }
  }
  return out;
}

class python_waiter_test : public control_plane_test {
protected:
  /// The ordinary pool (its guests' python waiter): fork-server pools, on by default, are
  /// fork_pool_test.cpp's.
  void start_pool(std::map<std::string, std::string> env = {}) {
    env.emplace("GUESTFLOW_FORK_POOL", "0");
    start({"--warm-pool", "s-1vcpu-256mb=2"}, env);
  }

  bool pool_ready() { return pool_full(2, std::chrono::seconds{60}); }

  /// A guest taken from a full pool, with the program at /workspace/prog.py.
  sandbox_created take(const std::string& body = pool_guest_body) {
    EXPECT_TRUE(pool_ready()) << call("GET", "/v1/pool").body;
    auto c = create(body);
    EXPECT_EQ(put_file(c.id, "/workspace/prog.py", program).status, 200u);
    return c;
  }

  /// The names of every process in the guest but the listing shell itself.
  std::string processes(const std::string& id) {
    return exec(id, "/bin/sh",
                {"-c", "for p in /proc/[0-9]*; do [ \"$p\" = /proc/$$ ] || cat $p/comm; done"})
        .stdout_text;
  }
};

TEST_F(python_waiter_test,
       the_first_python_run_of_a_pooled_guest_is_served_as_python3_runs_it) {
  start_pool();
  auto c =
      take(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"envs":{"GREETING":"hi"}})");
  auto r = exec(c.id, "python3", {"/workspace/prog.py", "3", "two words"});
  EXPECT_EQ(r.exit_code, 3) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, served_by_waiter +
                               "\n"
                               "argv ['/workspace/prog.py', '3', 'two words']\n"
                               "env hi 1\n"
                               "cwd /workspace path0 /workspace name __main__ file "
                               "/workspace/prog.py\n");
  EXPECT_EQ(r.stderr_text, "to stderr\n");
  // Only the first exec meets the waiter: the second is python3 as usual, same output.
  auto again = exec(c.id, "python3", {"/workspace/prog.py", "3", "two words"});
  EXPECT_EQ(again.exit_code, 3);
  EXPECT_EQ(started_as(again), started_plainly);
  EXPECT_EQ(again.stdout_text.substr(again.stdout_text.find('\n')),
            r.stdout_text.substr(r.stdout_text.find('\n')));
  EXPECT_EQ(again.stderr_text, r.stderr_text);
}

TEST_F(python_waiter_test, an_uncaught_exception_is_status_1_with_the_program_s_traceback) {
  start_pool();
  auto c = take();
  auto r = exec(c.id, "python3", {"prog.py", "raise"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(started_as(r), served_by_waiter);
  auto plain = exec(c.id, "python3", {"prog.py", "raise"});
  EXPECT_EQ(started_as(plain), started_plainly.substr(0, 19) + "prog.py");
  EXPECT_EQ(plain.exit_code, 1);
  EXPECT_EQ(r.stderr_text, plain.stderr_text) << "the waiter's frames must not show";
  EXPECT_NE(r.stderr_text.find("Traceback (most recent call last):\n  File "
                               "\"/workspace/prog.py\", line 13, in <module>"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("ValueError: deliberate"), std::string::npos);
}

TEST_F(python_waiter_test, code_given_with_dash_c_is_served_as_python3_runs_it) {
  // What a flow run's first exec is (`python3 -c UNPACK_RUN BUNDLE` under timeout).
  const std::string code = R"py(import os, sys
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read().split(b"\0")
print("served" if cmdline[2].startswith(b"# guestflow python waiter") else "plain")
print("argv", sys.argv, "orig", sys.orig_argv[:2], sys.orig_argv[3:])
print("path0", repr(sys.path[0]), "name", __name__, "file" in dir(), "__file__" in globals())
print("loader", __loader__.__name__, "cwd", os.getcwd())
if sys.argv[1:] == ["raise"]:
    raise ValueError("deliberate")
sys.exit(int(sys.argv[1]))
)py";
  start_pool();
  auto c = take();
  auto r = exec(c.id, "timeout", {"--kill-after=5", "60", "python3", "-c", code, "7"});
  EXPECT_EQ(r.exit_code, 7) << r.stderr_text;
  EXPECT_EQ(started_as(r), "served");
  auto plain = exec(c.id, "timeout", {"--kill-after=5", "60", "python3", "-c", code, "7"});
  EXPECT_EQ(plain.exit_code, 7) << plain.stderr_text;
  EXPECT_EQ(started_as(plain), "plain");
  EXPECT_EQ(r.stdout_text.substr(r.stdout_text.find('\n')),
            "\nargv ['-c', '7'] orig ['python3', '-c'] ['7']\n"
            "path0 '' name __main__ False False\n"
            "loader BuiltinImporter cwd /workspace\n");
  EXPECT_EQ(plain.stdout_text.substr(plain.stdout_text.find('\n')),
            r.stdout_text.substr(r.stdout_text.find('\n')));
  EXPECT_EQ(r.stderr_text, plain.stderr_text);

  auto d = take();
  auto fails = exec(d.id, "python3", {"-c", code, "raise"});
  EXPECT_EQ(fails.exit_code, 1);
  EXPECT_EQ(started_as(fails), "served");
  auto fails_plainly = exec(d.id, "python3", {"-c", code, "raise"});
  EXPECT_EQ(started_as(fails_plainly), "plain");
  EXPECT_EQ(fails.stderr_text, fails_plainly.stderr_text)
      << "the waiter's frames must not show";
  EXPECT_NE(fails.stderr_text.find("  File \"<string>\", line 9, in <module>\n"),
            std::string::npos)
      << fails.stderr_text;
}

TEST_F(python_waiter_test,
       the_runtime_s_timeout_form_runs_and_terms_its_group_at_the_deadline) {
  start_pool();
  auto c = take();
  auto fresh = processes(create(built_guest_body).id);
  auto r =
      exec(c.id, "timeout", {"--kill-after=5", "1", "python3", "/workspace/prog.py", "hang"});
  EXPECT_EQ(r.exit_code, 124) << r.stderr_text; // TERMed: timeout(1)'s "timed out"
  EXPECT_EQ(started_as(r), served_by_waiter);
  // The grandchild went with the group: the guest runs what a fresh guest runs.
  EXPECT_TRUE(eventually([&] { return processes(c.id) == fresh; })) << processes(c.id);

  // A program that ignores TERM is KILLed with its group 5 s later: coreutils' 137.
  auto s = take();
  auto start = std::chrono::steady_clock::now();
  auto stubborn = exec(s.id, "timeout",
                       {"--kill-after=5", "1", "python3", "/workspace/prog.py", "stubborn"});
  EXPECT_EQ(stubborn.exit_code, 137) << stubborn.stderr_text;
  EXPECT_EQ(started_as(stubborn), served_by_waiter);
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds{6});
  EXPECT_TRUE(eventually([&] { return processes(s.id) == fresh; })) << processes(s.id);

  // Within the deadline: the program's own status.
  auto d = take();
  auto ok =
      exec(d.id, "timeout", {"--kill-after=5", "60", "python3", "/workspace/prog.py", "4"});
  EXPECT_EQ(ok.exit_code, 4) << ok.stderr_text;
  EXPECT_EQ(started_as(ok), served_by_waiter);
}

TEST_F(python_waiter_test, any_other_first_exec_never_sees_the_waiter) {
  start_pool();
  auto c = take();
  auto fresh = processes(create(built_guest_body).id);
  EXPECT_FALSE(fresh.empty());
  EXPECT_EQ(processes(c.id), fresh);
  EXPECT_EQ(exec(c.id, "ls", {"-A", "/tmp"}).stdout_text, "") << "its FIFO went with it";
  // Nor does a python3 run the waiter would not serve as the command runs (an option).
  auto d = take();
  auto r = exec(d.id, "python3", {"-u", "/workspace/prog.py", "5"});
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_EQ(started_as(r), "started as python3 -u");
  EXPECT_EQ(processes(d.id), fresh);
  // The refill runs meanwhile: its helpers are zombies for the moment between their exit
  // and the server's wait, so only a zombie that stays is a waiter nobody reaped.
  EXPECT_TRUE(eventually([&] { return zombie_children(cp_->pid()).empty(); }))
      << "the waiters were reaped";
}

TEST_F(python_waiter_test, a_delete_with_a_live_waiter_leaves_nothing) {
  start_pool();
  auto c = take();
  ASSERT_GE(guest_pids(c.id).size(), 2u) << "init and the waiter";
  auto del = call("DELETE", "/v1/sandboxes/" + c.id);
  EXPECT_EQ(del.status, 200u) << del.body;
  EXPECT_TRUE(eventually([&] { return guest_pids(c.id).empty(); }));
  EXPECT_TRUE(eventually([&] { return zombie_children(cp_->pid()).empty(); }))
      << "the waiter was reaped";
}

TEST_F(python_waiter_test,
       after_a_kill_9_no_old_waiter_is_left_and_adopted_guests_get_new_ones) {
  start_pool();
  auto c = take(); // taken, its waiter never used
  ASSERT_TRUE(pool_ready());
  auto fresh = processes(create(built_guest_body).id);
  ::kill(cp_->pid(), SIGKILL);
  cp_.reset();

  start_pool();
  // The dead server's waiter is killed at the restart (and gone once the host reaps it:
  // an orphan is not the new server's child).
  EXPECT_TRUE(eventually([&] { return processes(c.id) == fresh; })) << processes(c.id);
  // The adopted pool guests serve their first python3 run with a waiter of the new server.
  auto d = take();
  auto r = exec(d.id, "python3", {"/workspace/prog.py", "6"});
  EXPECT_EQ(r.exit_code, 6) << r.stderr_text;
  EXPECT_EQ(started_as(r), served_by_waiter);
  EXPECT_TRUE(eventually([&] { return processes(d.id) == fresh; })) << processes(d.id);
}

TEST_F(python_waiter_test,
       guests_built_on_demand_and_a_pool_without_waiters_run_python3_itself) {
  start_pool();
  auto b = create(built_guest_body);
  ASSERT_EQ(put_file(b.id, "/workspace/prog.py", program).status, 200u);
  auto r = exec(b.id, "python3", {"/workspace/prog.py"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(started_as(r), started_plainly);

  start_pool({{"GUESTFLOW_POOL_PYTHON", "0"}});
  auto c = take();
  auto p = exec(c.id, "python3", {"/workspace/prog.py"});
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(started_as(p), started_plainly);
}

/// Prints whether the python3 running it is the waiter, then which of `names` it has loaded.
std::string modules_loaded(const std::vector<std::string>& names) {
  std::string list;
  for (const auto& n : names)
    list += "'" + n + "',";
  return "import sys\n"
         "with open('/proc/self/cmdline', 'rb') as f:\n"
         "    served = f.read().split(b'\\0')[2].startswith(b'# guestflow python waiter')\n"
         "print('served' if served else 'plain', [m for m in (" +
         list + ") if m in sys.modules])\n";
}

TEST_F(python_waiter_test, a_failing_preload_is_logged_once_and_the_pool_serves_without_it) {
  // `this` prints the Zen of Python when imported: not into the first run's output.
  start_pool({{"GUESTFLOW_PRELOAD", "json,no_such_module_gf,this,xml.dom.minidom"}});
  const std::vector<std::string> names{"json", "no_such_module_gf", "this", "xml.dom.minidom"};
  for (int i = 0; i < 3; ++i) {
    auto c = take();
    auto r = exec(c.id, "python3", {"-c", modules_loaded(names)});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "served ['json', 'this', 'xml.dom.minidom']\n");
    EXPECT_EQ(r.stderr_text, "");
    EXPECT_EQ(exec(c.id, "ls", {"-A", "/tmp"}).stdout_text, "")
        << "the waiter's FIFO and failure report are gone";
  }
  auto log = cp_->stderr_text();
  const std::string warning = "preload no_such_module_gf: ModuleNotFoundError";
  auto first = log.find(warning);
  EXPECT_NE(first, std::string::npos) << log;
  EXPECT_EQ(log.find(warning, first + 1), std::string::npos)
      << "logged once for every guest of the pool:\n"
      << log;
}

TEST_F(python_waiter_test, an_exec_the_waiter_does_not_serve_gets_a_clean_interpreter) {
  start_pool({{"GUESTFLOW_PRELOAD", "json,xml.dom.minidom"}});
  const auto code = std::string{"import sys; print(sorted(sys.modules))"};
  auto fresh = exec(create(built_guest_body).id, "python3", {"-u", "-c", code});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.stderr_text;
  EXPECT_EQ(fresh.stdout_text.find("'json'"), std::string::npos);
  // An interpreter option: the waiter is killed and python3 starts as it would anywhere.
  auto c = take();
  auto r = exec(c.id, "python3", {"-u", "-c", code});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, fresh.stdout_text) << "no preloaded module beyond python's own";
  // Any other command first: the same.
  auto d = take();
  EXPECT_EQ(exec(d.id, "true").exit_code, 0);
  EXPECT_EQ(exec(d.id, "python3", {"-c", code}).stdout_text,
            exec(create(built_guest_body).id, "python3", {"-c", code}).stdout_text);
  // And a run it serves has them (the contrast that makes the two above mean something).
  auto e = take();
  EXPECT_EQ(
      exec(e.id, "python3", {"-c", modules_loaded({"json", "xml.dom.minidom"})}).stdout_text,
      "served ['json', 'xml.dom.minidom']\n");
}

TEST_F(python_waiter_test,
       a_guest_preloaded_with_the_runner_runs_a_flow_as_a_fresh_guest_does) {
  start_pool({{"GUESTFLOW_PRELOAD", "guestflow:runner"}});
  const std::filesystem::path src{GUESTFLOW_SOURCE_DIR};
  auto graph = test_support::slurp(src / "examples/flows/hello.json");
  auto spec =
      R"({"graph":)" + graph +
      R"(,"inputs":[{"input_value":"hi from the pool","type":"chat"}],"executor":"auto"})";
  // How a flow run starts the runner (guest/unpack_run.py), saying first whether the
  // waiter served it and whether the runner's engine was already imported.
  const std::string start =
      "import runpy, sys\n"
      "with open('/proc/self/cmdline', 'rb') as f:\n"
      "    served = f.read().split(b'\\0')[2].startswith(b'# guestflow python waiter')\n"
      "sys.stderr.write('served %s preloaded %s\\n' % (served, "
      "'asyncio' in sys.modules))\n"
      "sys.argv = ['/workspace/run/runner.py', '/workspace/run/spec.json']\n"
      "sys.path[0] = '/workspace/run'\n"
      "runpy.run_path(sys.argv[0], run_name='__main__')\n";
  auto run = [&](const std::string& id) {
    for (const auto& f : std::filesystem::directory_iterator{src / "guest"}) {
      auto name = f.path().filename().string();
      if (f.path().extension() != ".py" || name == "session_files.py") continue;
      EXPECT_EQ(put_file(id, "/workspace/run/" + name, test_support::slurp(f.path())).status,
                200u);
    }
    EXPECT_EQ(put_file(id, "/workspace/run/spec.json", spec).status, 200u);
    return exec(id, "timeout", {"--kill-after=5", "60", "python3", "-c", start});
  };
  auto pooled_run = run(take().id);
  auto fresh_run = run(create(built_guest_body).id);
  EXPECT_EQ(pooled_run.stderr_text, "served True preloaded True\n");
  EXPECT_EQ(fresh_run.stderr_text, "served False preloaded False\n");
  for (const auto* r : {&pooled_run, &fresh_run}) {
    EXPECT_EQ(r->exit_code, 0) << r->stdout_text;
    EXPECT_NE(r->stdout_text.find(R"("text":"hi from the pool")"), std::string::npos)
        << r->stdout_text;
    auto last = r->stdout_text.rfind('\n', r->stdout_text.size() - 2);
    EXPECT_EQ(r->stdout_text.substr(last + 1), "{\"t\":\"done\"}\n") << r->stdout_text;
  }
  // Frame for frame the same run, times and ids aside.
  auto shape = [](const std::string& out) {
    std::string kinds;
    for (size_t at = 0; (at = out.find(R"({"t":")", at)) != std::string::npos; ++at)
      kinds += out.substr(at + 6, out.find('"', at + 6) - at - 6) + " ";
    return kinds;
  };
  EXPECT_EQ(shape(pooled_run.stdout_text), shape(fresh_run.stdout_text));
}

} // namespace
} // namespace guestflow::testing
