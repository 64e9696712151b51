// Exec on real guests: streaming as output arrives, heartbeats, disconnect kills, caps,
// UTF-8 repair, and the guest's limits (memory, pids) seen through the API.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/slurp.hpp"

#include <filesystem>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;
/// What differs between the kinds (limits seen per process in a namespace guest, the
/// whole Sentry in a gVisor guest), or needs no guest at all.
using control_plane_exec_per_kind = control_plane_test;
const std::string small = R"({"shape":"s-1vcpu-256mb","envs":{"PATH":"/usr/bin:/bin"}})";

exec_stream_line parse_line(const std::string& line) {
  auto l = decode<exec_stream_line>(line);
  EXPECT_TRUE(l) << line;
  return l ? *l : exec_stream_line{};
}

/// Host pids of the guest whose command line is exactly `argv` (NUL-joined).
std::vector<int> pids_running(const std::string& id, const std::string& argv) {
  std::vector<int> out;
  for (int pid : guest_pids(id)) {
    if (test_support::slurp("/proc/" + std::to_string(pid) + "/cmdline") == argv)
      out.push_back(pid);
  }
  return out;
}

class control_plane_exec : public both_kinds_test {
protected:
  /// Whether a process whose command line is exactly `argv` runs in the guest: its host
  /// pids for a namespace guest; asked inside a gVisor guest, whose processes are its
  /// user-space kernel's, not the host's.
  bool running(const std::string& id, const std::string& argv) {
    if (!gvisor()) return !pids_running(id, argv).empty();
    auto r = exec(id, "/usr/bin/python3",
                  {"-c", "import os, sys\n"
                         "for p in os.listdir('/proc'):\n"
                         "    if p.isdigit():\n"
                         "        try: sys.stdout.write(open('/proc/' + p + '/cmdline').read() "
                         "+ '\\n')\n"
                         "        except OSError: pass\n"});
    return r.stdout_text.find(argv + "\n") != std::string::npos;
  }
};

TEST_P(control_plane_exec, stream_delivers_output_before_the_command_ends) {
  auto g = create(small);
  http_stream s{
      client(), "POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
      exec_body("/bin/sh", {"-c", "echo first; echo warn >&2; "
                                  "while [ ! -e /workspace/release ]; do sleep 0.05; done; "
                                  "echo second; exit 7"})};
  ASSERT_EQ(s.status(), 200u);
  EXPECT_EQ(s.headers().at("content-type"), "application/x-ndjson");
  std::vector<exec_stream_line> seen;
  // The command blocks until the test releases it: these lines can only be early output.
  while (seen.size() < 2) {
    auto line = s.next_line(20s);
    ASSERT_TRUE(line) << "stream ended before the command was released";
    auto l = parse_line(*line);
    if (l.type != exec_stream_line::kind::heartbeat) seen.push_back(l);
  }
  for (const auto& l : seen) {
    EXPECT_TRUE(l.type == exec_stream_line::kind::stdout_chunk ||
                l.type == exec_stream_line::kind::stderr_chunk);
    EXPECT_EQ(l.text, l.type == exec_stream_line::kind::stdout_chunk ? "first\n" : "warn\n");
  }
  ASSERT_EQ(put_file(g.id, "/workspace/release", "").status, 200u);
  std::string rest;
  std::optional<int> exit_code;
  while (auto line = s.next_line(20s)) {
    auto l = parse_line(*line);
    if (l.type == exec_stream_line::kind::stdout_chunk) rest += l.text;
    if (l.type == exec_stream_line::kind::exit_code) exit_code = l.exit_code;
  }
  EXPECT_EQ(rest, "second\n");
  EXPECT_EQ(exit_code, 7);
}

TEST_P(control_plane_exec, stream_sends_heartbeats) {
  stop();
  start({"--heartbeat-ms", "100"});
  auto g = create(small);
  http_stream s{
      client(), "POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
      exec_body("/bin/sh", {"-c", "while [ ! -e /workspace/done ]; do sleep 0.05; done"})};
  ASSERT_EQ(s.status(), 200u);
  auto first = s.next_line(10s);
  ASSERT_TRUE(first);
  EXPECT_EQ(parse_line(*first).type, exec_stream_line::kind::heartbeat) << *first;
  ASSERT_EQ(put_file(g.id, "/workspace/done", "").status, 200u);
  std::optional<int> exit_code;
  while (auto line = s.next_line(20s)) {
    auto l = parse_line(*line);
    if (l.type == exec_stream_line::kind::exit_code) exit_code = l.exit_code;
  }
  EXPECT_EQ(exit_code, 0);
}

TEST_P(control_plane_exec, client_disconnect_kills_the_command) {
  auto g = create(small);
  const std::string argv = std::string{"sleep"} + '\0' + "317" + '\0';
  {
    http_stream s{client(), "POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
                  exec_body("/bin/sh", {"-c", "echo started; exec sleep 317"})};
    auto first = parse_line(s.next_line(20s).value_or("{}"));
    ASSERT_EQ(first.text, "started\n");
    ASSERT_TRUE(eventually([&] { return running(g.id, argv); }))
        << "the command should be running in the guest";
    s.disconnect();
  }
  EXPECT_TRUE(eventually([&] { return !running(g.id, argv); }))
      << "the command outlived its client";
  // The guest itself is fine and usable.
  EXPECT_EQ(exec(g.id, "/bin/echo", {"still here"}).stdout_text, "still here\n");
  // Buffered calls are watched too.
  {
    http_stream s{client(), "POST", "/v1/sandboxes/" + g.id + "/exec",
                  exec_body("/bin/sh", {"-c", "exec sleep 317"})};
    ASSERT_TRUE(eventually([&] { return running(g.id, argv); }));
    s.disconnect();
  }
  EXPECT_TRUE(eventually([&] { return !running(g.id, argv); }));
}

TEST_P(control_plane_exec, output_caps_truncate_and_say_so) {
  stop();
  start({"--max-stdout-bytes", "1000", "--max-stderr-bytes", "10"});
  auto g = create(small);
  auto r =
      exec(g.id, "/usr/bin/python3",
           {"-c", "import sys; sys.stdout.write('x' * 300000); sys.stderr.write('e' * 50)"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text, std::string(1000, 'x'));
  EXPECT_EQ(r.stderr_text, std::string(10, 'e'));
  ASSERT_TRUE(r.error);
  EXPECT_NE(r.error->find("stdout truncated at 1000 bytes"), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("stderr truncated at 10 bytes"), std::string::npos) << *r.error;

  http_stream s{client(), "POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
                exec_body("/usr/bin/python3", {"-c", "print('y' * 300000)"})};
  size_t bytes = 0;
  int errors = 0;
  std::optional<int> exit_code;
  while (auto line = s.next_line(20s)) {
    auto l = parse_line(*line);
    if (l.type == exec_stream_line::kind::stdout_chunk) bytes += l.text.size();
    if (l.type == exec_stream_line::kind::error) {
      ++errors;
      EXPECT_EQ(l.text, "stdout truncated at 1000 bytes");
    }
    if (l.type == exec_stream_line::kind::exit_code) exit_code = l.exit_code;
  }
  EXPECT_EQ(bytes, 1000u);
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(exit_code, 0) << "the command was drained, not blocked or killed";
}

TEST_P(control_plane_exec, invalid_utf8_becomes_replacement_characters) {
  auto g = create(small);
  auto r = exec(g.id, "/usr/bin/printf", {"ok\\377\\303(\\342\\202\\254"});
  EXPECT_EQ(r.stdout_text, "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xE2\x82\xAC");
}

TEST_P(control_plane_exec, a_command_execve_cannot_take_is_refused_before_anything_runs) {
  auto g = create(small);
  expect_refusal(exec_reply(g.id, std::string{"/bin/ec\0ho", 10}, {"x"}), 400, "NUL");
  expect_refusal(exec_reply(g.id, "/bin/echo", {std::string{"a\0b", 3}}), 400, "NUL");
  expect_refusal(exec_reply(g.id, "", {}), 400, "empty");
  EXPECT_EQ(exec(g.id, "/bin/echo", {"ok"}).stdout_text, "ok\n") << "the guest is untouched";
}

TEST_F(control_plane_exec_per_kind, memory_limit_kill_is_reported_as_oom) {
  auto g = create(R"({"shape":"s-1vcpu-64mb"})");
  auto r = exec(g.id, "/usr/bin/python3",
                {"-c", "b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096): "
                       "b[i] = 1\nprint('survived')"});
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_EQ(r.stdout_text.find("survived"), std::string::npos);
  ASSERT_TRUE(r.error);
  EXPECT_NE(r.error->find("out of memory (memory limit 64 MiB)"), std::string::npos)
      << *r.error;
  auto v = call("GET", "/v1/sandboxes/" + g.id);
  EXPECT_NE(v.body.find("out of memory"), std::string::npos) << v.body;
  EXPECT_EQ(view(g.id).status, sandbox_status::running) << "an OOM kill ends the command only";
  EXPECT_EQ(exec(g.id, "/bin/echo", {"ok"}).stdout_text, "ok\n");
}

/// A difference: a gVisor guest's memory is its Sentry's, in the guest's memory cgroup, so an
/// OOM kill there ends the whole sandbox, not one command; the limit holds all the same.
TEST_F(control_plane_exec_per_kind, a_gvisor_guests_memory_limit_holds_and_oom_ends_it) {
  auto g = create(R"({"shape":"s-1vcpu-64mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  auto r = exec(g.id, "/usr/bin/python3",
                {"-c", "b = bytearray(200 * 1024 * 1024)\nfor i in range(0, len(b), 4096): "
                       "b[i] = 1\nprint('survived')"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.stdout_text.find("survived"), std::string::npos);
  expect_refusal(exec_reply(g.id, "/bin/echo", {"ok"}), 502, "not running");
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_TRUE(eventually([&] { return guest_pids(g.id).empty(); }));
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "gvisor" / g.id));
}

TEST_F(control_plane_exec_per_kind, fork_bomb_is_contained_and_cleaned_up) {
  auto g = create(small);
  auto r = exec(g.id, "/usr/bin/timeout",
                {"-s", "KILL", "3", "/bin/sh", "-c", "b() { b | b & }; b; wait"});
  // The pids cap is what stopped it: forks failed inside the guest.
  EXPECT_NE(r.stderr_text.find("fork"), std::string::npos)
      << r.exit_code << r.stderr_text.substr(0, 300);
  // The host and the server stay responsive; the guest never exceeded its pids cap.
  EXPECT_LE(guest_pids(g.id).size(), 600u);
  EXPECT_EQ(data<whoami>(call("GET", "/v1/whoami")).running, 1u);
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_TRUE(eventually([&] { return guest_pids(g.id).empty(); }))
      << guest_pids(g.id).size() << " processes of the guest survived its deletion";
}

TEST_P(control_plane_exec, double_forked_daemon_is_gone_after_delete) {
  auto g = create(small);
  const std::string argv = std::string{"sleep"} + '\0' + "4242" + '\0';
  auto r = exec(g.id, "/bin/sh", {"-c", "(setsid sleep 4242 >/dev/null 2>&1 &); echo spawned"});
  EXPECT_EQ(r.stdout_text, "spawned\n");
  ASSERT_TRUE(eventually([&] { return running(g.id, argv); }))
      << "the daemon should outlive the exec call";
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_TRUE(eventually([&] { return guest_pids(g.id).empty(); }));
}

TEST_F(control_plane_exec_per_kind, simulated_domain_answers_without_guests) {
  stop();
  start({"--simulate-latency-ms", "5"});
  auto g = create(small);
  EXPECT_EQ(g.spawn_ms, 5u);
  auto r = exec(g.id, "/bin/true");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(guest_pids(g.id).empty());
  EXPECT_EQ(workspace_count(), 0u);
}

GUESTFLOW_BOTH_KINDS(control_plane_exec);

} // namespace
} // namespace guestflow::testing
