// A stall of the host is not the program's time: the control plane SIGSTOPped for longer
// than a program's timeout while the program (3 s) runs and ends in its guest does not
// turn the run into a `timeout` — `guestflow code` against this control plane reports the
// program's own exit and output once the control plane runs again; a program that kills
// itself under such a stall is `killed` (137), never `timeout`: only the guest's
// timeout(1) (exit 124) says a program timed out; a stall past the runtime's own deadline
// is `transient`. The program's exec_ms is its own run, whoever held the host: a call held
// before the spawn, a stall during the run and after the exit (both guest kinds, buffered
// and streamed: the exit watcher of spawn_helper/protocol.hpp), a pooled guest's wait.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/slurp.hpp"

#include <fstream>
#include <functional>
#include <signal.h>
#include <thread>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

/// True while a process of guest `id` runs `python3`.
bool runs_python(const std::string& id) {
  for (int pid : guest_pids(id))
    if (test_support::slurp("/proc/" + std::to_string(pid) + "/cmdline").find("python3") !=
        std::string::npos)
      return true;
  return false;
}

/// Runs `guestflow code --timeout 10 --json PROGRAM` against the control plane and
/// SIGSTOPs the control plane for `stall` once the program runs; the program must end
/// inside the stall.
class control_plane_stall : public control_plane_test {
protected:
  /// `guestflow code --timeout TIMEOUT --json PROGRAM` against the control plane, on a
  /// thread that fills `run` (join it before reading `run`).
  std::thread run_code(const std::string& program, const std::string& timeout,
                       std::chrono::seconds deadline, control_plane_process::outcome& run) {
    return std::thread{[&run, program, timeout, deadline, port = cp_->port()] {
      run = control_plane_process::run_to_exit(
          {"code", "--timeout", timeout, "--json", program},
          {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:" + std::to_string(port)}},
          deadline);
    }};
  }

  /// The guest whose python3 runs, once one does (empty if none within 60 s).
  std::string python_guest() {
    std::string id;
    eventually(
        [&] {
          auto list = data<sandbox_list>(call("GET", "/v1/sandboxes"));
          for (const auto& s : list.data)
            if (runs_python(s.id)) id = s.id;
          return !id.empty();
        },
        60s);
    return id;
  }

  control_plane_process::outcome run_through_a_stall(const std::string& program,
                                                     std::chrono::seconds stall) {
    control_plane_process::outcome run;
    std::thread runner = run_code(program, "10", 120s, run);
    const std::string id = python_guest();
    const bool started = !id.empty();
    bool ended = false;
    if (started) {
      auto stopped_at = std::chrono::steady_clock::now();
      EXPECT_EQ(::kill(cp_->pid(), SIGSTOP), 0);
      ended = eventually([&] { return !runs_python(id); }, 30s);
      std::this_thread::sleep_until(stopped_at + stall); // the fault's length, not a wait
      EXPECT_EQ(::kill(cp_->pid(), SIGCONT), 0);
    }
    runner.join();
    EXPECT_TRUE(started) << "the program never started";
    EXPECT_TRUE(ended) << "the program did not end while the control plane was stopped";
    return run;
  }
};

TEST_F(control_plane_stall, a_stopped_control_plane_does_not_make_a_program_time_out) {
  auto program = dir_.path() / "three_seconds.py";
  std::ofstream{program} << "import time\nprint('start', flush=True)\ntime.sleep(3)\n"
                            "print('done')\n";
  // The stall: longer than the program's timeout, the program ends inside it.
  auto run = run_through_a_stall(program.string(), 14s);
  EXPECT_EQ(run.status, 0) << run.stdout_text << run.stderr_text;
  EXPECT_NE(run.stdout_text.find(R"("exit_code":0)"), std::string::npos) << run.stdout_text;
  EXPECT_NE(run.stdout_text.find(R"("stdout":"start\ndone\n")"), std::string::npos)
      << run.stdout_text;
  EXPECT_EQ(run.stderr_text.find("timeout"), std::string::npos) << run.stderr_text;
  // Its time is its own 3 s, not the 14 s the control plane was stopped for.
  auto at = run.stdout_text.find(R"("execution_time_ms":)");
  ASSERT_NE(at, std::string::npos) << run.stdout_text;
  auto ms = std::stoull(run.stdout_text.substr(at + 20));
  EXPECT_GE(ms, 2900u) << run.stdout_text;
  EXPECT_LT(ms, 4000u) << "the control plane's stall counted as the program's time: "
                       << run.stdout_text;
}

TEST_F(control_plane_stall, a_stall_past_the_runtimes_own_deadline_is_no_timeout_either) {
  // The runtime gives an exec call the program's timeout + 30 s before it stops waiting:
  // a control plane stopped longer than that (1 s + 30 s, the program long done) fails the
  // call as `transient` (a caller may retry it), never as the program's `timeout`.
  auto program = dir_.path() / "quick.py";
  std::ofstream{program} << "import time\nprint('start', flush=True)\ntime.sleep(0.5)\n";
  control_plane_process::outcome run;
  std::thread runner = run_code(program.string(), "1", 180s, run);
  const bool started = !python_guest().empty();
  if (started) {
    auto stopped_at = std::chrono::steady_clock::now();
    EXPECT_EQ(::kill(cp_->pid(), SIGSTOP), 0);
    // The fault's length, past the runtime's deadline (31 s): not a wait for anything.
    std::this_thread::sleep_until(stopped_at + 36s);
    EXPECT_EQ(::kill(cp_->pid(), SIGCONT), 0);
  }
  runner.join();
  ASSERT_TRUE(started) << "the program never started";
  EXPECT_NE(run.status, 124) << run.stdout_text << run.stderr_text;
  EXPECT_EQ(run.stdout_text.find(R"("exit_code":-1)"), std::string::npos) << run.stdout_text;
  EXPECT_NE(run.stderr_text.find("guestflow code: transient:"), std::string::npos)
      << run.stderr_text;
}

TEST_F(control_plane_stall, a_program_that_kills_itself_under_a_stall_is_killed_not_timed_out) {
  // 3 s into a 10 s timeout the program SIGKILLs itself while the control plane is stopped
  // for 14 s: the host measured 14 s across the exec, the guest's timeout(1) never fired.
  auto program = dir_.path() / "kills_itself.py";
  std::ofstream{program} << "import os, time\nprint('start', flush=True)\ntime.sleep(3)\n"
                            "os.kill(os.getpid(), 9)\n";
  auto run = run_through_a_stall(program.string(), 14s);
  EXPECT_NE(run.stdout_text.find(R"("exit_code":137)"), std::string::npos)
      << run.stdout_text << run.stderr_text;
  EXPECT_EQ(run.stdout_text.find(R"("exit_code":-1)"), std::string::npos) << run.stdout_text;
  EXPECT_EQ(run.stderr_text.find("timeout"), std::string::npos) << run.stderr_text;
}

TEST_F(control_plane_stall, a_program_past_its_timeout_still_times_out) {
  // The guest's timeout(1) decides: TERM at 2 s, exit 124, reported as exit -1.
  auto program = dir_.path() / "forever.py";
  std::ofstream{program} << "import time\nprint('start', flush=True)\ntime.sleep(60)\n";
  auto started = std::chrono::steady_clock::now();
  auto run = control_plane_process::run_to_exit(
      {"code", "--timeout", "2", "--json", program.string()},
      {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:" + std::to_string(cp_->port())}},
      std::chrono::seconds{120});
  EXPECT_NE(run.stdout_text.find(R"("exit_code":-1)"), std::string::npos)
      << run.stdout_text << run.stderr_text;
  EXPECT_NE(run.stdout_text.find(R"("stdout":"start\n")"), std::string::npos)
      << run.stdout_text;
  // TERM ended it at its timeout, not KILL 5 s later.
  EXPECT_LT(std::chrono::steady_clock::now() - started, 30s);
}

TEST_F(control_plane_stall, a_call_held_by_the_host_is_not_the_programs_exec_ms) {
  // Every exec held 3 s on its worker before the program starts (a slow host: the fault
  // plan's delay); the program itself runs 0.5 s.
  stop();
  start({"--faults", "exec:delay=3s"});
  auto g = create();
  auto t0 = std::chrono::steady_clock::now();
  auto r = exec(g.id, "sleep", {"0.5"});
  auto wall = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_GE(wall, 3s) << "the fault did not hold the call";
  EXPECT_GE(r.exec_ms, 450u);
  EXPECT_LT(r.exec_ms, 2000u) << "the host's hold counted as the program's time";

  // Through the runtime: `guestflow code` reports the program's time as execution_time_ms.
  auto program = dir_.path() / "half_a_second.py";
  std::ofstream{program} << "import time\ntime.sleep(0.5)\nprint('done')\n";
  auto run = control_plane_process::run_to_exit(
      {"code", "--timeout", "10", "--json", program.string()},
      {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:" + std::to_string(cp_->port())}},
      std::chrono::seconds{120});
  ASSERT_EQ(run.status, 0) << run.stdout_text << run.stderr_text;
  auto at = run.stdout_text.find(R"("execution_time_ms":)");
  ASSERT_NE(at, std::string::npos) << run.stdout_text;
  auto ms = std::stoull(run.stdout_text.substr(at + 20));
  EXPECT_GE(ms, 450u) << run.stdout_text;
  EXPECT_LT(ms, 2000u) << "the host's hold counted as the program's time: " << run.stdout_text;
}

/// A streamed exec's exit line (decoded), read to the end of the stream.
std::optional<exec_stream_line> streamed_exit(const http_client& c, const std::string& body,
                                              const std::string& id) {
  http_stream s{c, "POST", "/v1/sandboxes/" + id + "/exec?stream=true", body};
  EXPECT_EQ(s.status(), 200u);
  std::optional<exec_stream_line> exit;
  while (auto line = s.next_line(60s)) {
    auto l = decode<exec_stream_line>(*line);
    EXPECT_TRUE(l) << *line;
    if (l && l->type == exec_stream_line::kind::exit_code) exit = *l;
  }
  return exit;
}

TEST_F(control_plane_stall, a_streamed_exec_says_the_programs_own_exec_ms_on_its_exit_line) {
  // The same 3 s hold before each program starts, streamed: the exit line carries the
  // program's own run, not the call's.
  stop();
  start({"--faults", "exec:delay=3s"});
  auto g = create();
  auto t0 = std::chrono::steady_clock::now();
  auto half = streamed_exit(client(), exec_body("sleep", {"0.5"}), g.id);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 3s) << "the fault did not hold the call";
  ASSERT_TRUE(half);
  EXPECT_EQ(half->exit_code, 0);
  ASSERT_TRUE(half->exec_ms) << "no exec_ms on the exit line";
  EXPECT_GE(*half->exec_ms, 450u);
  EXPECT_LT(*half->exec_ms, 2000u) << "the host's hold counted as the program's time";

  // A program that really runs 2 s says so, streamed and buffered.
  auto two = streamed_exit(client(), exec_body("sleep", {"2"}), g.id);
  ASSERT_TRUE(two);
  ASSERT_TRUE(two->exec_ms);
  EXPECT_GE(*two->exec_ms, 2000u);
  EXPECT_LT(*two->exec_ms, 4000u) << "the host's hold counted as the program's time";
  auto buffered = exec(g.id, "sleep", {"2"});
  EXPECT_EQ(buffered.exit_code, 0) << buffered.stderr_text;
  EXPECT_GE(buffered.exec_ms, 2000u);
  EXPECT_LT(buffered.exec_ms, 4000u) << "the host's hold counted as the program's time";
}

TEST_F(control_plane_stall, a_pooled_guests_first_python_run_counts_from_its_hand_over) {
  // The pool's python waiter started when the pool filled; the exec it serves starts when
  // the server hands it the command, after the guest waited in the pool.
  stop();
  start({"--warm-pool", "s-1vcpu-256mb=1"});
  ASSERT_TRUE(eventually(
      [&] {
        return call("GET", "/v1/pool").body.find(R"("target":1,"ready":1)") !=
               std::string::npos;
      },
      60s))
      << call("GET", "/v1/pool").body;
  const auto ready = std::chrono::steady_clock::now();
  std::this_thread::sleep_until(ready + 3s); // the guest waits in the pool: not a sync
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  ASSERT_EQ(put_file(g.id, "/workspace/half.py",
                     "import sys, time\n"
                     "time.sleep(0.5)\n"
                     "print(open('/proc/self/cmdline', 'rb').read()"
                     ".split(b'\\0')[1].decode())\n")
                .status,
            200u);
  auto r = exec(g.id, "python3", {"/workspace/half.py"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "-c\n") << "not served by the pool's python waiter";
  EXPECT_GE(r.exec_ms, 450u);
  EXPECT_LT(r.exec_ms, 2500u) << "the guest's time in the pool counted as the program's";
}

/// The control plane's children whose command line starts with `argv0` (a namespace
/// guest's command: the helper makes it the server's child) or contains `--process` (a
/// gVisor exec's `runsc exec`, the server's child too).
std::vector<pid_t> exec_children(pid_t server, const std::string& argv0) {
  const auto parent = " " + std::to_string(server) + " "; // after the state: ") S 1234 "
  auto children = test_support::pids_where("stat", [&](const std::string& stat) {
    auto at = stat.rfind(')');
    return at != std::string::npos && stat.compare(at + 3, parent.size(), parent) == 0;
  });
  std::vector<pid_t> out;
  for (pid_t pid : children) {
    auto cmd = test_support::slurp("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmd.rfind(argv0 + '\0', 0) == 0 ||
        cmd.find(std::string{"--process"} + '\0') != std::string::npos)
      out.push_back(pid);
  }
  return out;
}

/// A zombie (or gone): the process exited and nobody reaped it yet.
bool exited(pid_t pid) {
  auto stat = test_support::slurp("/proc/" + std::to_string(pid) + "/stat");
  auto at = stat.rfind(')');
  return at == std::string::npos || stat.compare(at + 1, 3, " Z ") == 0;
}

/// Both guest kinds: the control plane SIGSTOPped for 8 s once a 3 s program's process
/// runs, held past the program's exit; exec_ms is still the program's 3 s.
class control_plane_stall_per_kind : public both_kinds_test {
protected:
  /// Runs `exec(sleep 3)` (`call` makes the call and returns exec_ms) while the control
  /// plane is stopped from the program's start until 8 s later.
  void stall_through(const std::function<std::optional<uint64_t>()>& call) {
    std::optional<uint64_t> exec_ms;
    std::thread caller{[&] { exec_ms = call(); }};
    std::vector<pid_t> program;
    bool started = eventually(
        [&] { return !(program = exec_children(cp_->pid(), "sleep")).empty(); }, 60s, 1ms);
    bool ended = false;
    if (started) {
      auto stopped_at = std::chrono::steady_clock::now();
      EXPECT_EQ(::kill(cp_->pid(), SIGSTOP), 0);
      ended = eventually([&] { return exited(program.front()); }, 30s);
      std::this_thread::sleep_until(stopped_at + 8s); // the fault's length, not a wait
      EXPECT_EQ(::kill(cp_->pid(), SIGCONT), 0);
    }
    caller.join();
    ASSERT_TRUE(started) << "the program never started";
    EXPECT_TRUE(ended) << "the program did not end while the control plane was stopped";
    ASSERT_TRUE(exec_ms) << "no exec_ms";
    EXPECT_GE(*exec_ms, 2900u);
    EXPECT_LT(*exec_ms, 4000u) << "the control plane's stall counted as the program's time";
  }
};

TEST_P(control_plane_stall_per_kind, a_stall_through_the_programs_exit_is_not_its_exec_ms) {
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  stall_through([&]() -> std::optional<uint64_t> {
    auto r = exec(g.id, "sleep", {"3"});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text; // its own exit, never a timeout's
    return r.exec_ms;
  });
  stall_through([&]() -> std::optional<uint64_t> {
    auto exit = streamed_exit(client(), exec_body("sleep", {"3"}), g.id);
    if (!exit) return std::nullopt;
    EXPECT_EQ(exit->exit_code, 0);
    return exit->exec_ms;
  });
}

GUESTFLOW_BOTH_KINDS(control_plane_stall_per_kind);

} // namespace
} // namespace guestflow::testing
