// `guestflow code` and `guestflow reap` as a user runs them, against the real local
// control plane (a child process on 127.0.0.1:0) and real guests.

#include "messages/jsend.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/runtime/flows.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/proc.hpp"
#include "tests/support/raw_connection.hpp"
#include "tests/support/slurp.hpp"

#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class code_test : public runtime_fixture {
protected:
  std::string program(const std::string& name, const std::string& code) {
    return file(name, code);
  }

  control_plane_process::outcome code(const std::vector<std::string>& args,
                                      std::map<std::string, std::string> extra = {}) {
    std::vector<std::string> all{"code"};
    all.insert(all.end(), args.begin(), args.end());
    return cli(all, std::move(extra));
  }

  static pid_t start_code(const std::map<std::string, std::string>& vars,
                          const std::string& program) {
    return start_cli({"code", "--timeout", "600", program}, vars);
  }

  ~code_test() override {
    for (int fd : outputs_)
      ::close(fd);
  }

  /// A run of this owner whose program has started (sleeping 10 min); returns its pid.
  /// Its create's answer has reached it by then: a CLI killed before that answer gets its
  /// guest undone by the control plane instead of leaving an orphan.
  pid_t live_run() {
    auto p =
        program("sleeps.py", "print('started', flush=True)\nimport time\ntime.sleep(600)\n");
    int out = -1;
    auto pid = start_cli({"code", "--timeout", "600", p}, env(), &out);
    outputs_.push_back(out); // open until the end: a CLI writing to a closed pipe would die
    std::string seen;
    read_stream(out, [&](std::string_view chunk) {
      seen.append(chunk);
      return seen.find("started\n") != std::string::npos;
    });
    EXPECT_EQ(seen, "started\n");
    EXPECT_TRUE(wait_for_live(1));
    return pid;
  }

  std::vector<int> outputs_; ///< live runs' stdout pipes

  /// An orphan: a live run killed with SIGKILL, which gives it no chance to clean up.
  void orphan_a_guest() {
    auto pid = live_run();
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ASSERT_EQ(live_guests().size(), 1u);
  }
};

/// A TCP listener on 127.0.0.1 (the host's loopback) that counts accepted connections.
struct loopback_listener {
  int fd = -1;
  uint16_t port = 0;
  loopback_listener() {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~loopback_listener() { ::close(fd); }
  int accepted() {
    int n = 0;
    while (int c = ::accept(fd, nullptr, nullptr)) {
      if (c < 0) break;
      ::close(c);
      ++n;
    }
    return n;
  }
};

/// Processes whose command line contains `marker` (any uid).
int processes_with(const std::string& marker) {
  auto pids = test_support::pids_where("cmdline", [&marker](std::string cmd) {
    for (auto& c : cmd)
      if (c == '\0') c = ' ';
    return cmd.find(marker) != std::string::npos && cmd.find("guestflow") == std::string::npos;
  });
  return static_cast<int>(pids.size());
}

} // namespace

TEST_F(code_test, prints_stdout_and_stderr_and_returns_the_exit_code) {
  auto p = program("p.py", "import sys\nprint('hello from the guest')\n"
                           "print('to stderr', file=sys.stderr)\nsys.exit(3)\n");
  auto r = code({p});
  EXPECT_EQ(r.status, 3) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "hello from the guest\n");
  EXPECT_NE(r.stderr_text.find("to stderr"), std::string::npos);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, isolation_picks_the_guest_kind_and_is_refused_where_not_offered) {
  auto p = program("k.py", "print(open('/proc/version').read().split()[2])\n");
  auto g = code({"--isolation", "gvisor", p});
  EXPECT_EQ(g.status, 0) << g.stderr_text;
  EXPECT_EQ(g.stdout_text, "4.4.0\n") << "gVisor's Sentry answers, not the host kernel";
  auto refused = code({"--isolation", "firecracker", p});
  EXPECT_EQ(refused.status, 125);
  EXPECT_NE(refused.stderr_text.find("GUESTFLOW_ISOLATION=firecracker"), std::string::npos)
      << refused.stderr_text;
  EXPECT_EQ(refused.stdout_text, "");
  EXPECT_TRUE(wait_for_live(0));
}

/// The kernel release a guest's program reads: "4.4.0" is gVisor's Sentry answering.
constexpr const char* kernel_release = "print(open('/proc/version').read().split()[2])\n";

TEST_F(code_test, component_isolation_picks_the_guest_kind_and_is_refused_where_not_offered) {
  auto p = program("k.py", kernel_release);
  auto component = [&](const std::string& kind, std::map<std::string, std::string> vars = {}) {
    std::vector<std::string> args{"component", "--flow-id", "f", "--component-id", "c"};
    if (!kind.empty()) args.insert(args.end(), {"--isolation", kind});
    args.insert(args.end(), {"--python", p});
    return cli(args, std::move(vars));
  };
  auto g = component("gvisor");
  EXPECT_EQ(g.status, 0) << g.stderr_text;
  EXPECT_EQ(g.stdout_text, "4.4.0\n") << "gVisor's Sentry answers, not the host kernel";
  auto env_only = component("", {{"GUESTFLOW_ISOLATION", "gvisor"}});
  EXPECT_EQ(env_only.stdout_text, "4.4.0\n") << env_only.stderr_text;
  auto flag_wins = component("namespaces", {{"GUESTFLOW_ISOLATION", "gvisor"}});
  EXPECT_EQ(flag_wins.status, 0) << flag_wins.stderr_text;
  EXPECT_NE(flag_wins.stdout_text, "4.4.0\n") << "--isolation wins over GUESTFLOW_ISOLATION";
  auto refused = component("firecracker");
  EXPECT_EQ(refused.status, 125);
  EXPECT_NE(refused.stderr_text.find("GUESTFLOW_ISOLATION=firecracker"), std::string::npos)
      << refused.stderr_text;
  EXPECT_EQ(refused.stdout_text, "");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, run_puts_the_flow_executor_in_the_isolation_asked_for) {
  auto f =
      file("kernel.json", python_flow(R"j("print(open('/proc/version').read().split()[2])")j"));
  auto g = cli({"run", f, "--input", "x"}, {{"GUESTFLOW_ISOLATION", "gvisor"}});
  EXPECT_EQ(g.status, 0) << g.stderr_text;
  const std::string sentry = R"("result": "4.4.0")"; // Chat Output's rendering of the REPL's
  EXPECT_NE(g.stdout_text.find(sentry), std::string::npos)
      << "the executor guest's kernel is gVisor's: " << g.stdout_text;
  auto flag = cli({"run", f, "--input", "x", "--isolation", "gvisor"});
  EXPECT_NE(flag.stdout_text.find(sentry), std::string::npos) << flag.stderr_text;
  auto flag_wins = cli({"run", f, "--input", "x", "--isolation", "namespaces"},
                       {{"GUESTFLOW_ISOLATION", "gvisor"}});
  EXPECT_EQ(flag_wins.status, 0) << flag_wins.stderr_text;
  EXPECT_NE(flag_wins.stdout_text.find("result"), std::string::npos) << flag_wins.stdout_text;
  EXPECT_EQ(flag_wins.stdout_text.find(sentry), std::string::npos)
      << "--isolation wins over GUESTFLOW_ISOLATION";
  for (auto vars :
       {std::map<std::string, std::string>{},
        std::map<std::string, std::string>{{"GUESTFLOW_ISOLATION", "firecracker"}}}) {
    std::vector<std::string> args{"run", f, "--input", "x"};
    if (vars.empty()) args.insert(args.end(), {"--isolation", "firecracker"});
    auto refused = cli(args, vars);
    EXPECT_EQ(refused.status, 2) << "bad input, never a weaker guest";
    EXPECT_NE(refused.stderr_text.find("GUESTFLOW_ISOLATION=firecracker"), std::string::npos)
        << refused.stderr_text;
    EXPECT_EQ(refused.stdout_text, "");
  }
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test,
       serve_isolation_reaches_its_creates_and_an_unoffered_one_is_refused_at_start) {
  auto refused = cli({"serve", "--listen", "127.0.0.1:0", "--isolation", "firecracker"},
                     {{"GUESTFLOW_WARM_POOL", "0"}});
  EXPECT_EQ(refused.status, 2);
  EXPECT_NE(refused.stderr_text.find("GUESTFLOW_ISOLATION=firecracker"), std::string::npos)
      << refused.stderr_text;
  EXPECT_EQ(refused.stdout_text, "");

  int out = -1;
  auto pid = start_cli({"serve", "--listen", "127.0.0.1:0", "--isolation", "gvisor"},
                       env({{"GUESTFLOW_WARM_POOL", "0"}, {"GUESTFLOW_TOKEN", ""}}), &out);
  std::string banner;
  read_stream(out, [&](std::string_view chunk) {
    banner.append(chunk);
    return banner.find('\n') != std::string::npos;
  });
  auto colon = banner.rfind(':');
  ASSERT_NE(colon, std::string::npos) << banner;
  auto port = static_cast<uint16_t>(std::stoi(banner.substr(colon + 1)));
  std::string body = R"j({"code":"print(open('/proc/version').read().split()[2])"})j";
  test_support::raw_connection c{port};
  c.send("POST /v1/sandbox/run HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
         "Content-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
  auto answer = c.read_to_close(120s);
  ::kill(pid, SIGTERM);
  int status = -1;
  ::waitpid(pid, &status, 0);
  ::close(out);
  EXPECT_EQ(answer.substr(0, 13), "HTTP/1.1 200 ") << answer;
  EXPECT_NE(answer.find(R"("stdout":"4.4.0\n")"), std::string::npos)
      << "the sandbox run's guest is gVisor's: " << answer;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, json_prints_a_sandbox_result) {
  auto p = program("p.py", "print(6 * 7)\n");
  auto r = code({"--json", p});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto res = decode<sandbox_result>(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(res) << r.stdout_text;
  EXPECT_EQ(res->stdout_text, "42\n");
  EXPECT_EQ(res->exit_code, 0);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, env_reaches_the_program) {
  auto p = program("p.py", "import os\nprint(os.environ['GREETING'])\n");
  auto r = code({"--env", "GREETING=bonjour", p});
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "bonjour\n");
}

TEST_F(code_test, timeout_returns_minus_one_with_the_output_before_the_kill) {
  auto p = program("p.py", "print('started')\nwhile True:\n    pass\n");
  auto r = code({"--json", "--timeout", "2", p});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto res = decode<sandbox_result>(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(res) << r.stdout_text;
  EXPECT_EQ(res->exit_code, -1);
  EXPECT_EQ(res->stdout_text, "started\n");
  auto plain = code({"--timeout", "2", p});
  EXPECT_EQ(plain.status, 124);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, memory_bomb_returns_137_oom) {
  auto p = program("p.py", "x = bytearray(400 * 1024 * 1024)\nprint('survived')\n");
  auto r = code({"--json", p}, {{"GUESTFLOW_SHAPE", "s-1vcpu-64mb"}});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto res = decode<sandbox_result>(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(res) << r.stdout_text;
  EXPECT_EQ(res->exit_code, 137);
  EXPECT_EQ(res->stdout_text.find("survived"), std::string::npos);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, network_off_cannot_reach_a_host_loopback_server) {
  loopback_listener host;
  auto p = program(
      "p.py", "import socket, sys\n"
              "s = socket.socket()\ns.settimeout(2)\n"
              "try:\n    s.connect(('127.0.0.1', " +
                  std::to_string(host.port) +
                  "))\n"
                  "    print('connected')\nexcept OSError as e:\n    print('refused', e)\n");
  auto r = code({p});
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.rfind("refused", 0), 0u) << r.stdout_text;
  EXPECT_EQ(host.accepted(), 0);
}

TEST_F(code_test, allowed_domains_are_refused_without_creating_a_guest) {
  auto p = program("p.py", "print(1)\n");
  auto r = code({p}, {{"LANGFLOW_SANDBOX_ALLOWED_DOMAINS", "pypi.org"}});
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.stderr_text.find("policy_refused"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("hostname"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test,
       the_cli_allocates_with_jemalloc_its_defaults_unless_malloc_conf_says_otherwise) {
  // stats_print: jemalloc prints its options at exit (stderr); no other malloc knows it.
  auto ours = cli({"version"}, {{"MALLOC_CONF", "stats_print:true"}});
  EXPECT_EQ(ours.status, 0);
  EXPECT_NE(ours.stderr_text.find("opt.narenas: 1\n"), std::string::npos) << ours.stderr_text;
  EXPECT_NE(ours.stderr_text.find("opt.dirty_decay_ms: 1000 "), std::string::npos)
      << ours.stderr_text;
  auto theirs =
      cli({"version"}, {{"MALLOC_CONF", "stats_print:true,narenas:3,dirty_decay_ms:10000"}});
  EXPECT_EQ(theirs.status, 0);
  EXPECT_NE(theirs.stderr_text.find("opt.narenas: 3\n"), std::string::npos)
      << theirs.stderr_text;
  EXPECT_NE(theirs.stderr_text.find("opt.dirty_decay_ms: 10000 "), std::string::npos)
      << theirs.stderr_text;
}

TEST_F(code_test, dash_dash_version_prints_what_the_version_command_prints) {
  // Packagers and install checks call `guestflow --version`; it is the same command.
  auto flag = cli({"--version"});
  auto command = cli({"version"});
  EXPECT_EQ(flag.status, 0) << flag.stderr_text;
  EXPECT_EQ(command.status, 0) << command.stderr_text;
  EXPECT_EQ(flag.stdout_text, command.stdout_text);
  EXPECT_EQ(flag.stdout_text.rfind("guestflow ", 0), 0u) << flag.stdout_text;
  EXPECT_EQ(flag.stdout_text.back(), '\n') << flag.stdout_text;
}

TEST_F(code_test, malformed_runtime_settings_are_refused_before_anything_runs) {
  auto p = program("p.py", "print('ran')\n");
  for (auto var : {"GUESTFLOW_LOCAL_MEMORY_FLOOR_MB", "GUESTFLOW_SWEEP_GRACE_SECONDS"}) {
    auto r = code({p}, {{var, "lots"}});
    EXPECT_EQ(r.status, 125) << var;
    EXPECT_NE(r.stderr_text.find(std::string{"bad_request: "} + var), std::string::npos)
        << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "");
  }
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, timeout_above_the_provider_cap_is_refused) {
  auto p = program("p.py", "print(1)\n");
  auto r = code({"--timeout", "86000", p});
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.stderr_text.find("policy_refused"), std::string::npos) << r.stderr_text;
}

TEST_F(code_test, createos_with_network_off_is_refused_before_any_request) {
  // CreateOS's base URL is a loopback listener that counts connections: a refusal decided
  // from CreateOS's known facts must make none (no start sweep, no catalog), leave no state
  // (not even the owner's lease file), and say which hole it refuses.
  loopback_listener createos;
  auto p = program("p.py", "print(1)\n");
  auto state = dir.path() / "createos-state"; // the runs' own, which nothing else makes
  std::map<std::string, std::string> vars{
      {"CREATEOS_SANDBOX_API_KEY", "test-key"},
      {"CREATEOS_SANDBOX_BASE_URL", "https://127.0.0.1:" + std::to_string(createos.port)},
      {"GUESTFLOW_STATE_DIR", state.string()}};
  for (auto args : {std::vector<std::string>{"code", p},
                    std::vector<std::string>{"component", "--flow-id", "f", "--component-id",
                                             "c", "--python", p}}) {
    auto r = control_plane_process::run_to_exit(args, vars, 60s);
    EXPECT_EQ(r.status, 125) << args[0];
    EXPECT_NE(r.stderr_text.find("policy_refused"), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("169.254"), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stdout_text, "");
    EXPECT_EQ(createos.accepted(), 0) << args[0] << " connected to CreateOS before refusing";
    EXPECT_FALSE(std::filesystem::exists(state)) << args[0] << " left state behind";
  }
}

TEST_F(code_test, unreachable_control_plane_is_unavailable_never_in_process) {
  auto p = program("p.py", "print('ran somewhere')\n");
  std::vector<std::string> all{"code", p};
  auto r = control_plane_process::run_to_exit(
      all,
      {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:9"},
       {"GUESTFLOW_STATE_DIR", (dir.path() / "runtime").string()}},
      120s);
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.stderr_text.find("unavailable"), std::string::npos) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("ran somewhere"), std::string::npos);
}

TEST_F(code_test, reap_after_sigkill_leaves_no_guest_and_no_guest_process) {
  auto marker = "gfreapmarker" + std::to_string(::getpid());
  auto p = program("p.py", "import subprocess\n"
                           "subprocess.Popen(['/bin/sh', '-c', 'sleep 600; echo " +
                               marker +
                               "'])\nprint('started', flush=True)\n"
                               "import time\ntime.sleep(600)\n");
  auto pid = start_code(env(), p);
  // Wait (deadline) until the guest and its marker process exist.
  test_support::eventually([&] { return !live_guests().empty() && processes_with(marker) > 0; },
                           60s, 50ms);
  ASSERT_EQ(live_guests().size(), 1u);
  ASSERT_GE(processes_with(marker), 1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  EXPECT_EQ(live_guests().size(), 1u); // SIGKILL gave the runtime no chance to clean up
  auto r = control_plane_process::run_to_exit({"reap"}, env(), 120s);
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "deleted 1\n");
  EXPECT_TRUE(wait_for_live(0));
  EXPECT_EQ(processes_with(marker), 0);
}

TEST_F(code_test, the_state_dir_spelt_another_way_is_the_same_owner) {
  ASSERT_NO_FATAL_FAILURE(orphan_a_guest());
  auto dir_spelt = env().at("GUESTFLOW_STATE_DIR") + "/./";
  auto r = control_plane_process::run_to_exit({"reap"},
                                              env({{"GUESTFLOW_STATE_DIR", dir_spelt}}), 120s);
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "deleted 1\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, sigterm_mid_run_deletes_the_guest_before_exiting) {
  auto pid = live_run();
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, output_reaches_the_terminal_while_the_program_runs_and_ctrl_c_exits_130) {
  auto p =
      program("live.py", "import sys, time\nprint('first', flush=True)\n"
                         "print('err first', file=sys.stderr, flush=True)\ntime.sleep(600)\n");
  int out = -1;
  auto pid = start_cli({"code", "--timeout", "600", p}, env(), &out);
  ASSERT_GT(pid, 0);
  std::string seen;
  read_stream(out, [&](std::string_view chunk) {
    seen.append(chunk);
    return seen.find("first\n") != std::string::npos;
  });
  EXPECT_EQ(seen, "first\n") << "the first line arrives before the program ends";
  EXPECT_EQ(::waitpid(pid, nullptr, WNOHANG), 0) << "the program is still running";
  ::kill(pid, SIGINT);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, two_runtimes_never_reap_each_others_guests) {
  auto p = program("p.py", "print('started', flush=True)\nimport time\ntime.sleep(600)\n");
  auto pid = start_code(env({{"GUESTFLOW_OWNER", "other1"}}), p);
  ASSERT_TRUE(wait_for_live(1));
  auto r = control_plane_process::run_to_exit({"reap"}, env(), 120s); // our owner id
  EXPECT_EQ(r.stdout_text, "deleted 0\n") << r.stderr_text;
  EXPECT_EQ(live_guests().size(), 1u);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, reap_and_start_sweeps_spare_a_live_run_of_the_same_owner) {
  auto pid = live_run(); // the same state dir, so the same owner id
  auto r = control_plane_process::run_to_exit({"reap"}, env(), 120s);
  EXPECT_EQ(r.status, 125);
  EXPECT_NE(r.stderr_text.find("another guestflow process"), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "");
  EXPECT_EQ(live_guests().size(), 1u);
  // A run that starts meanwhile leaves it alone too, even with no grace period at all.
  auto q = program("q.py", "print('ok')\n");
  auto other = code({q}, {{"GUESTFLOW_SWEEP_GRACE_SECONDS", "0"}});
  EXPECT_EQ(other.status, 0) << other.stderr_text;
  EXPECT_EQ(live_guests().size(), 1u);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, reap_deletes_only_orphans_older_than_asked_and_counts_them) {
  ASSERT_NO_FATAL_FAILURE(orphan_a_guest());
  // The orphan is seconds old: an hour's age spares it, whatever the start-up sweep's
  // grace would be (reap does not sweep at start).
  auto none = control_plane_process::run_to_exit(
      {"reap", "--older-than", "3600"}, env({{"GUESTFLOW_SWEEP_GRACE_SECONDS", "0"}}), 120s);
  EXPECT_EQ(none.status, 0) << none.stderr_text;
  EXPECT_EQ(none.stdout_text, "deleted 0\n");
  EXPECT_EQ(live_guests().size(), 1u);
  auto all = control_plane_process::run_to_exit({"reap"}, env(), 120s);
  EXPECT_EQ(all.status, 0) << all.stderr_text;
  EXPECT_EQ(all.stdout_text, "deleted 1\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, embedded_runs_on_one_state_dir_take_turns_and_a_waiting_one_stops_on_sigint) {
  // No control plane configured: each CLI embeds one on the state dir, and only one may
  // hold it at a time.
  auto state = (dir.path() / "shared-state").string();
  std::map<std::string, std::string> vars{{"GUESTFLOW_STATE_DIR", state}};
  auto long_run = program("long.py", "import time\ntime.sleep(600)\n");
  auto short_run = program("short.py", "print('second')\n");
  auto exited_within = [](pid_t pid, std::chrono::seconds limit, int* status) {
    return test_support::eventually([&] { return ::waitpid(pid, status, WNOHANG) != 0; }, limit,
                                    20ms);
  };
  auto first = start_cli({"code", "--timeout", "600", long_run}, vars);
  ASSERT_GT(first, 0);
  // Its embedded control plane serves a socket in the state dir once it holds the dir.
  auto sock = std::filesystem::path{state} / "control-plane.sock";
  ASSERT_TRUE(
      test_support::eventually([&] { return std::filesystem::exists(sock); }, 60s, 20ms))
      << sock;

  int second_out = -1;
  auto second = start_cli({"code", short_run}, vars, &second_out);
  auto gives_up = start_cli({"code", short_run}, vars);
  // Ctrl-C once it is guestflow's to handle (its signal watch blocks SIGINT first thing).
  auto handles_sigint = [](pid_t pid) {
    std::istringstream in{test_support::slurp("/proc/" + std::to_string(pid) + "/status")};
    for (std::string line; std::getline(in, line);)
      if (line.rfind("SigBlk:", 0) == 0)
        return (std::stoull(line.substr(7), nullptr, 16) & (1ull << (SIGINT - 1))) != 0;
    return false;
  };
  test_support::eventually([&] { return handles_sigint(gives_up); }, 60s, 20ms);
  ::kill(gives_up, SIGINT);
  int status = -1;
  bool stopped = exited_within(gives_up, 30s, &status);
  if (!stopped) ::kill(gives_up, SIGKILL), ::waitpid(gives_up, nullptr, 0);
  EXPECT_TRUE(stopped) << "Ctrl-C did not stop a CLI waiting for the state dir";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130);
  EXPECT_EQ(::waitpid(second, &status, WNOHANG), 0) << "the second run did not wait";

  ::kill(first, SIGTERM);
  ASSERT_TRUE(exited_within(first, 60s, &status));
  ASSERT_TRUE(exited_within(second, 120s, &status));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  std::string said;
  char buf[256];
  for (ssize_t n; (n = ::read(second_out, buf, sizeof buf)) > 0;)
    said.append(buf, static_cast<size_t>(n));
  EXPECT_EQ(said, "second\n");
  ::close(second_out);
}

TEST_F(code_test, a_run_sweeps_its_owners_orphans_older_than_the_grace_at_start) {
  ASSERT_NO_FATAL_FAILURE(orphan_a_guest());
  auto q = program("q.py", "print('ok')\n");
  // Seconds old: the default hour of grace spares it.
  auto spared = code({q});
  EXPECT_EQ(spared.status, 0) << spared.stderr_text;
  EXPECT_EQ(live_guests().size(), 1u);
  // No grace: the next run's start-up sweep deletes it before that run exits.
  auto swept = code({q}, {{"GUESTFLOW_SWEEP_GRACE_SECONDS", "0"}});
  EXPECT_EQ(swept.status, 0) << swept.stderr_text;
  EXPECT_EQ(swept.stdout_text, "ok\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(code_test, a_state_dir_that_cannot_be_made_still_runs_code_but_reap_refuses) {
  // With a control plane configured, the state dir only holds the owner's lease.
  auto not_a_dir = file("not-a-dir", "x");
  std::map<std::string, std::string> vars{{"GUESTFLOW_STATE_DIR", not_a_dir + "/state"}};
  auto q = program("q.py", "print('ok')\n");
  auto r = code({q}, vars);
  EXPECT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "ok\n");
  auto reap = cli({"reap"}, vars);
  EXPECT_EQ(reap.status, 125);
  EXPECT_NE(reap.stderr_text.find("cannot tell whether another guestflow process"),
            std::string::npos)
      << reap.stderr_text;
}

TEST_F(code_test, a_program_on_standard_input_runs_like_a_file) {
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  ASSERT_EQ(::pipe2(out, O_CLOEXEC), 0);
  auto vars = env();
  pid_t pid = ::fork();
  if (pid == 0) {
    for (auto& [k, v] : vars)
      ::setenv(k.c_str(), v.c_str(), 1);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    char bin[] = GUESTFLOW_BIN, code_arg[] = "code", dash[] = "-";
    char* argv[] = {bin, code_arg, dash, nullptr};
    ::execv(bin, argv);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  std::string program = "print('from stdin')\n";
  ASSERT_EQ(::write(in[1], program.data(), program.size()),
            static_cast<ssize_t>(program.size()));
  ::close(in[1]);
  std::string said;
  char buf[256];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    said.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = -1;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(said, "from stdin\n");
  EXPECT_TRUE(wait_for_live(0));
}
