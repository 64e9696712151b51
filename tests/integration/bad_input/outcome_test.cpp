// Honest outcomes: output cut at the control plane's cap is said everywhere (and fails
// the CLI unless accepted), `oom` is only what the memory cgroup counted (other SIGKILLs
// are `killed`, a real timeout `timeout`), and `reap` beside a `serve` that holds the
// embedded state dir refuses at once instead of waiting for it.

#include "messages/run.hpp"
#include "tests/integration/bad_input/door_harness.hpp"

#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class outcome_door : public door_fixture {
protected:
  /// A program printing four times the control plane's stdout cap, then exiting 0.
  std::string chatty_program() {
    return file("chatty.py", "import sys\nsys.stdout.write('x' * " +
                                 std::to_string(4 * test_output_cap) + ")\n");
  }

  /// `POST /v1/components/run` of `program` (fresh guest): the answer's body.
  std::string component(const std::string& program, const std::string& extra = {}) {
    std::string body = R"({"flow_id":"f","component_id":"c","program":)" + quote_json(program) +
                       (extra.empty() ? "" : "," + extra) + "}";
    auto reply = call("POST", "/v1/components/run", body);
    EXPECT_EQ(reply.status, 200u) << reply.body;
    return reply.body;
  }

  static bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
  }
};

} // namespace

TEST_F(outcome_door, a_cut_output_is_said_everywhere_and_fails_the_cli_unless_accepted) {
  auto p = chatty_program();
  auto json = cli({"code", "--json", p});
  EXPECT_EQ(json.status, 125) << json.stderr_text;
  auto res = decode<sandbox_result>(json.stdout_text.substr(0, json.stdout_text.find('\n')));
  ASSERT_TRUE(res) << json.stdout_text.substr(0, 200);
  EXPECT_EQ(res->exit_code, 0);
  EXPECT_TRUE(res->truncated.stdout_cut);
  EXPECT_FALSE(res->truncated.stderr_cut);
  EXPECT_EQ(res->stdout_text.size(), test_output_cap);
  EXPECT_TRUE(has(json.stderr_text, "truncated")) << json.stderr_text;

  auto accepted = cli({"code", "--json", "--allow-truncated", p});
  EXPECT_EQ(accepted.status, 0) << accepted.stderr_text;

  // Streamed to the terminal: the cut arrives as the stream's outcome line.
  auto live = cli({"code", p});
  EXPECT_EQ(live.status, 125) << live.stderr_text;
  // Everything before the cut reached stdout, and nothing after it. (The harness once read
  // stdout line by line and dropped a last line without '\n': these 64 KiB of 'x'.)
  EXPECT_EQ(live.stdout_text.size(), test_output_cap);
  EXPECT_EQ(live.stdout_text.find_first_not_of('x'), std::string::npos);
  EXPECT_TRUE(has(live.stderr_text, "--allow-truncated")) << live.stderr_text;

  auto comp = cli({"component", "--flow-id", "f", "--component-id", "c", "--python", p});
  EXPECT_EQ(comp.status, 125) << comp.stderr_text;

  auto sandbox = call("POST", "/v1/sandbox/run",
                      R"({"code":"import sys\nsys.stdout.write('x' * 300000)\n"})");
  EXPECT_EQ(sandbox.status, 200u);
  EXPECT_TRUE(has(sandbox.body, R"("truncated":["stdout"])")) << sandbox.body.substr(0, 100);
  auto answer = component("import sys\nsys.stderr.write('e' * 300000)\n");
  EXPECT_TRUE(has(answer, R"("truncated":["stderr"])")) << answer.substr(answer.size() - 300);

  // The plugin never passes a cut output off as the program's whole output.
  auto refused = plugin(R"({"code":"import sys\nsys.stdout.write('x' * 300000)\n"})");
  EXPECT_TRUE(has(refused, "SandboxExecutionError") && has(refused, "truncated")) << refused;
  auto kept = plugin(R"({"code":"import sys\nsys.stdout.write('x' * 300000)\n"})",
                     {{"GUESTFLOW_ALLOW_TRUNCATED", "true"}});
  EXPECT_TRUE(has(kept, "\"exit_code\": 0") && has(kept, "truncated")) << kept.substr(0, 200);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(outcome_door, only_a_kill_the_memory_cgroup_counted_is_oom) {
  // Exit 137 by choice, SIGKILL of itself, SIGKILL of its timeout(1) parent: killed.
  auto exit137 = component("import sys\nsys.exit(137)\n");
  EXPECT_TRUE(has(exit137, R"("exit_code":137)") && has(exit137, R"("outcome":"killed")"))
      << exit137;
  auto self_kill = component("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n");
  EXPECT_TRUE(has(self_kill, R"("outcome":"killed")")) << self_kill;
  auto parent_kill = component("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n");
  EXPECT_TRUE(has(parent_kill, R"("outcome":"killed")")) << parent_kill;
  // A real memory blow-up (every page touched) in the smallest guest: oom.
  auto blow_up = component("x = b'x' * (1 << 30)\nprint('survived')\n");
  EXPECT_TRUE(has(blow_up, R"("exit_code":137)") && has(blow_up, R"("outcome":"oom")"))
      << blow_up;
  // A real timeout: timeout.
  auto slow = component("while True:\n    pass\n", R"("timeout_seconds":2)");
  EXPECT_TRUE(has(slow, R"("exit_code":-1)") && has(slow, R"("outcome":"timeout")")) << slow;
  // The CLI says which kill it was.
  auto p = file("exit137.py", "import sys\nsys.exit(137)\n");
  auto r = cli({"code", p});
  EXPECT_EQ(r.status, 137);
  EXPECT_TRUE(has(r.stderr_text, "killed")) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(outcome_door, reap_beside_a_serve_holding_the_embedded_state_dir_refuses_at_once) {
  // No control plane configured: serve embeds one on the state dir and holds it.
  auto state = (dir.path() / "embedded-state").string();
  std::map<std::string, std::string> vars{{"GUESTFLOW_STATE_DIR", state}};
  control_plane_process embedded_serve{
      {"serve", "--listen", "127.0.0.1:0"}, vars, dir.path() / "embedded-serve.stderr"};
  // A bound, not a timing: without the fix reap waits for serve to end, i.e. forever.
  auto r = control_plane_process::run_to_exit({"reap"}, vars, 60s);
  EXPECT_EQ(r.status, 125) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "another guestflow process of owner")) << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, "its guests are live, not orphans; nothing was deleted. "
                                 "Reap once it has ended."))
      << r.stderr_text;
  EXPECT_TRUE(has(r.stderr_text, state + "/owner-")) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "");
  auto reusable = control_plane_process::run_to_exit(
      {"reap", "--reusable", "--idle-longer-than", "0"}, vars, 60s);
  EXPECT_EQ(reusable.status, 125) << reusable.stderr_text;
  EXPECT_EQ(embedded_serve.stop(), 0);
}
