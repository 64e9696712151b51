// Bad input through every door: each malformed input of the table goes through the CLI
// (`guestflow code`), the bridge's HTTP API (`POST /v1/sandbox/run` on `guestflow serve`)
// and the Langflow plugin (its sandbox backend, as Langflow calls it), and each door must
// answer the same typed error — and leave no guest, no guest record and no file behind.

#include "messages/http_status.hpp"
#include "tests/integration/bad_input/door_harness.hpp"

#include <gtest/gtest.h>
#include <regex>

using namespace guestflow;
using namespace guestflow::testing;

namespace {

struct bad_input {
  std::string name;
  /// `guestflow code` flags (the program file is appended) and environment.
  std::vector<std::string> cli_flags;
  std::map<std::string, std::string> cli_env;
  /// The members of the `/v1/sandbox/run` body besides `code`, as JSON text.
  std::string bridge_fields;
  /// The plugin's `run(code, env=…)` env (JSON object text, or empty) and its process
  /// environment (Langflow's settings).
  std::string plugin_env;
  std::map<std::string, std::string> plugin_settings;
  ec expected;
};

const std::vector<bad_input>& table() {
  static const std::vector<bad_input> rows{
      // The runtime's own wrapper (timeout(1), python3) is found through PATH.
      {"env_sets_PATH",
       {"--env", "PATH=/nonexistent"},
       {},
       R"("env":{"PATH":"/nonexistent"})",
       R"({"PATH":"/nonexistent"})",
       {},
       ec::bad_request},
      // The dynamic loader's variables decide what code timeout(1) itself runs.
      {"env_sets_LD_PRELOAD",
       {"--env", "LD_PRELOAD=/workspace/evil.so"},
       {},
       R"("env":{"LD_PRELOAD":"/workspace/evil.so"})",
       R"({"LD_PRELOAD":"/workspace/evil.so"})",
       {},
       ec::bad_request},
      {"env_name_empty",
       {"--env", "=value"},
       {},
       R"("env":{"":"value"})",
       R"({"":"value"})",
       {},
       ec::bad_request},
      // Domain allow-lists cannot be enforced: refused, never silently widened.
      {"allowed_domains",
       {},
       {{"LANGFLOW_SANDBOX_ALLOWED_DOMAINS", "example.com"}},
       R"("allowed_domains":["example.com"])",
       "",
       {{"LANGFLOW_SANDBOX_ALLOWED_DOMAINS", "example.com"}},
       ec::policy_refused},
      // Over the provider's cap (the local control plane's is 3600 s), under the wire maximum.
      {"timeout_over_the_cap",
       {"--timeout", "7200"},
       {},
       R"("timeout_seconds":7200)",
       "",
       {{"LANGFLOW_SANDBOX_TIMEOUT_SECONDS", "7200"}},
       ec::policy_refused},
  };
  return rows;
}

/// "guestflow code: <code>: …" → the code.
std::string cli_code(const std::string& stderr_text) {
  std::smatch m;
  std::regex re{"guestflow code: ([a-z_]+): "};
  return std::regex_search(stderr_text, m, re) ? m[1].str() : std::string{};
}

class bad_input_door : public door_fixture {};

} // namespace

TEST_F(bad_input_door, every_door_answers_the_same_typed_error_and_creates_nothing) {
  auto program = file("p.py", "open('/workspace/created-by-the-program', 'w').write('x')\n"
                              "print('the program ran')\n");
  auto records_before = guest_records();
  auto files_before = control_plane_files();
  for (const auto& row : table()) {
    SCOPED_TRACE(row.name);
    auto want = std::string{to_string(row.expected)};

    auto args = std::vector<std::string>{"code"};
    args.insert(args.end(), row.cli_flags.begin(), row.cli_flags.end());
    args.push_back(program);
    auto cli_out = cli(args, row.cli_env);
    EXPECT_EQ(cli_out.status, 125) << cli_out.stdout_text << cli_out.stderr_text;
    EXPECT_EQ(cli_code(cli_out.stderr_text), want) << cli_out.stderr_text;
    EXPECT_EQ(cli_out.stdout_text.find("the program ran"), std::string::npos);

    auto body = R"({"code":"print('the program ran')\n",)" + row.bridge_fields + "}";
    auto reply = call("POST", "/v1/sandbox/run", body);
    EXPECT_EQ(reply.status, http_status(row.expected)) << reply.body;
    EXPECT_NE(reply.body.find(R"("code":")" + want + "\""), std::string::npos) << reply.body;

    auto case_json = std::string{R"j({"code":"print('the program ran')\n")j"} +
                     (row.plugin_env.empty() ? "" : ",\"env\":" + row.plugin_env) + "}";
    auto answer = plugin(case_json, row.plugin_settings);
    EXPECT_NE(answer.find("\"code\": \"" + want + "\""), std::string::npos) << answer;
    EXPECT_EQ(answer.find("\"result\""), std::string::npos) << answer;
  }
  EXPECT_TRUE(wait_for_live(0));
  EXPECT_EQ(guest_records(), records_before);
  EXPECT_EQ(control_plane_files(), files_before);
}
