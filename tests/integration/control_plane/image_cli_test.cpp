// `guestflow image add|ls|rm` as a user runs it: against a daemon through
// GUESTFLOW_CONTROL_PLANE_URL (+ key), against the embedded control plane on a state dir,
// and refused for CreateOS.
#include "tests/integration/control_plane/image_fixture.hpp"

namespace guestflow::testing {
namespace {

namespace fs = std::filesystem;
using outcome = control_plane_process::outcome;

class image_cli : public image_test {
protected:
  /// The environment of a CLI aimed at this test's daemon (no CreateOS, whatever the
  /// test process has: blank counts as unset).
  std::map<std::string, std::string> daemon_env() const {
    return {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:" + std::to_string(cp_->port())},
            {"GUESTFLOW_CONTROL_PLANE_KEY", api_key_},
            {"CREATEOS_SANDBOX_API_KEY", ""},
            {"CREATEOS_API_KEY", ""}};
  }

  static outcome cli(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env) {
    std::vector<std::string> argv{"image"};
    argv.insert(argv.end(), args.begin(), args.end());
    return control_plane_process::run_to_exit(argv, env, std::chrono::seconds{120});
  }

  static void expect_output(const outcome& o, int status, const std::string& needle,
                            bool on_stderr = false) {
    EXPECT_EQ(o.status, status) << "stdout: " << o.stdout_text << "\nstderr: " << o.stderr_text;
    const auto& text = on_stderr ? o.stderr_text : o.stdout_text;
    EXPECT_NE(text.find(needle), std::string::npos)
        << "expected '" << needle << "' in " << (on_stderr ? "stderr" : "stdout") << ": "
        << text;
  }
};

TEST_F(image_cli, add_ls_rm_against_a_daemon_with_a_key) {
  stop();
  api_key_ = "image-key";
  start({"--api-key", api_key_});
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "cli");
  auto env = daemon_env();

  expect_output(cli({"add", "tiny", "--rootfs", tree.string()}, env), 0, "added tiny: rootfs");
  auto ls = cli({"ls"}, env);
  expect_output(ls, 0, "NAME");
  EXPECT_NE(ls.stdout_text.find("debian:12"), std::string::npos);
  EXPECT_NE(ls.stdout_text.find(tree.string()), std::string::npos) << ls.stdout_text;
  auto json = cli({"ls", "--json"}, env);
  ASSERT_EQ(json.status, 0) << json.stderr_text;
  auto list = decode<image_list>(json.stdout_text);
  ASSERT_TRUE(list) << json.stdout_text;
  EXPECT_EQ(list->total, 2u);
  EXPECT_EQ(image_names(), (std::vector<std::string>{"debian:12", "tiny"}));

  // In use: refused, naming the guest (policy_refused).
  auto g = create_on("tiny");
  auto in_use = cli({"rm", "tiny"}, env);
  expect_output(in_use, 125, "image in use", true);
  expect_output(in_use, 125, g.id, true);
  expect_output(in_use, 125, "policy_refused", true);
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  expect_output(cli({"rm", "tiny"}, env), 0, "removed tiny");
  EXPECT_EQ(image_names(), std::vector<std::string>{"debian:12"});

  // A wrong key is the daemon's refusal, not a crash.
  auto wrong = env;
  wrong["GUESTFLOW_CONTROL_PLANE_KEY"] = "nope";
  expect_output(cli({"ls"}, wrong), 125, "API key", true);
}

TEST_F(image_cli, bad_input_exits_2) {
  auto env = daemon_env();
  expect_output(cli({"add", "Bad", "--rootfs", "/x"}, env), 2, "image name", true);
  expect_output(cli({"add", "x"}, env), 2, "exactly one", true);
  expect_output(cli({"frob"}, env), 2, "unknown subcommand", true);
  auto missing = cli({"add", "x", "--rootfs", (dir_.path() / "none.tar").string()}, env);
  expect_output(missing, 2, "does not exist", true);
  expect_output(cli({"add", "x", "--python-env", dir_.path().string()}, env), 2, "bin/python",
                true);
  expect_output(cli({"rm", "nope"}, env), 125, "not_found", true);
  // A relative path is the CLI's working directory's (made absolute before it is sent).
  auto rel = cli({"add", "x", "--rootfs", "relative-that-does-not-exist.tar"}, env);
  expect_output(rel, 2, "/relative-that-does-not-exist.tar", true);
}

TEST_F(image_cli, the_embedded_control_plane_keeps_images_in_the_state_dir) {
  stop(); // the embedded control plane needs the state dir for itself
  auto state = dir_.path() / "embedded-state";
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  std::map<std::string, std::string> env{{"GUESTFLOW_STATE_DIR", state.string()},
                                         {"GUESTFLOW_CONTROL_PLANE_URL", ""},
                                         {"CREATEOS_SANDBOX_API_KEY", ""},
                                         {"CREATEOS_API_KEY", ""}};
  expect_output(cli({"add", "py", "--python-env", venv.string()}, env), 0,
                "added py: python-env");
  expect_output(cli({"ls"}, env), 0, "python-env");
  EXPECT_TRUE(fs::exists(state / "images" / "py" / "image.json"));
  // A daemon on the same state dir has it.
  state_dir_ = state;
  start();
  EXPECT_EQ(image_names(), (std::vector<std::string>{"debian:12", "py"}));
  auto g = create_on("py");
  EXPECT_EQ(exec(g.id, "python3", {"-c", "import marker"}).stdout_text, "marker imported\n");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  stop();
  expect_output(cli({"rm", "py"}, env), 0, "removed py");
  EXPECT_FALSE(fs::exists(state / "images" / "py"));
  start(); // TearDown stops it
}

TEST_F(image_cli, a_preload_is_stored_shown_imported_by_the_pool_and_refused_when_bad) {
  auto env = daemon_env();
  auto venv = dir_.path() / "venv";
  make_venv(venv);
  // A module name no Python module can have: bad_request (exit 2), nothing imported.
  auto bad =
      cli({"add", "py", "--python-env", venv.string(), "--preload", "marker,os;id"}, env);
  expect_output(bad, 2, "not a Python module name", true);
  expect_output(bad, 2, "bad_request", true);
  auto wire = call("POST", "/v1/images",
                   R"({"name":"py","python_env":)" + quote_json(venv.string()) +
                       R"(,"preload":["../x"]})");
  expect_refusal(wire, 400, "preload");
  EXPECT_EQ(image_names(), std::vector<std::string>{"debian:12"});

  expect_output(
      cli({"add", "py", "--python-env", venv.string(), "--preload", "marker, json"}, env), 0,
      "preload json,marker");
  expect_output(cli({"ls"}, env), 0, "json,marker");
  auto json = cli({"ls", "--json"}, env);
  auto list = decode<image_list>(json.stdout_text);
  ASSERT_TRUE(list) << json.stdout_text;
  ASSERT_EQ(list->total, 2u);
  EXPECT_EQ(list->data[1].preload, (std::vector<std::string>{"json", "marker"}));

  // A pool on it: its guests' first python3 run starts with both imported, and what
  // `marker` prints when imported went nowhere.
  stop();
  start({"--warm-pool", "s-1vcpu-256mb@py=1"});
  ASSERT_TRUE(eventually(
      [&] { return call("GET", "/v1/pool").body.find(R"("ready":1)") != std::string::npos; },
      std::chrono::seconds{60}))
      << call("GET", "/v1/pool").body;
  auto g = create_on("py");
  auto r = exec(g.id, "python3",
                {"-c", "import sys; print([m in sys.modules for m in ('json', 'marker')])"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "[True, True]\n");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
}

TEST_F(image_cli, createos_has_its_own_templates) {
  std::map<std::string, std::string> env{{"GUESTFLOW_CONTROL_PLANE_URL", ""},
                                         {"CREATEOS_SANDBOX_API_KEY", "k"},
                                         {"CREATEOS_SANDBOX_BASE_URL", "https://127.0.0.1:9"}};
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"ls"}, {"rm", "x"}, {"add", "x", "--rootfs", "/x.tar"}}) {
    auto o = cli(args, env);
    expect_output(o, 125, "unavailable", true);
    expect_output(o, 125, "CreateOS has its own templates", true);
  }
}

} // namespace
} // namespace guestflow::testing
