// Which first execs of a pool guest the python waiter serves (python_waiter::request_for):
// exactly `python3 FILE…` or `python3 -c CODE…`, alone or under `timeout --kill-after=5 N`,
// with an environment
// that leaves python3's start-up as the waiter's was; and the request it then writes.
#include "controlplane/local/guests/fork_template.hpp"
#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/service/python_waiter.hpp"

#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

namespace guestflow::local {
namespace {

const std::vector<std::string> waiter_env = exec_environment({});

std::optional<std::string> request(const std::string& cmd, std::vector<std::string> args,
                                   const std::map<std::string, std::string>& envs = {}) {
  return python_waiter::request_for(exec_request{cmd, std::move(args)}, exec_environment(envs),
                                    waiter_env);
}

/// The NUL-separated fields of a request.
std::vector<std::string> fields(const std::string& r) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i] == '\0') {
      out.push_back(r.substr(start, i - start));
      start = i + 1;
    }
  EXPECT_EQ(start, r.size()) << "a request ends with a NUL";
  return out;
}

TEST(python_waiter, serves_a_plain_script_run_with_its_argv_and_the_exec_environment) {
  auto r = request("python3", {"/workspace/main.py", "a b", ""}, {{"GREETING", "hi"}});
  ASSERT_TRUE(r);
  auto env = exec_environment({{"GREETING", "hi"}});
  std::vector<std::string> want{
      "guestflow-waiter-1", "",    "/workspace", "3",
      "/workspace/main.py", "a b", "",           std::to_string(env.size())};
  want.insert(want.end(), env.begin(), env.end());
  EXPECT_EQ(fields(*r), want);
}

TEST(python_waiter, serves_the_runtime_timeout_form_with_its_duration) {
  for (std::string n : {"5", "30", "1.5", "2m", "0"}) {
    auto r = request("timeout", {"--kill-after=5", n, "python3", "main.py", "x"});
    ASSERT_TRUE(r) << n;
    auto f = fields(*r);
    EXPECT_EQ(f[1], n);
    EXPECT_EQ(f[3], "2");
    EXPECT_EQ(f[4], "main.py");
    EXPECT_EQ(f[5], "x");
  }
}

TEST(python_waiter, serves_code_given_with_dash_c_alone_or_under_the_runtime_timeout) {
  auto r = request("python3", {"-c", "import sys\nprint(sys.argv)", "a b"});
  ASSERT_TRUE(r);
  auto f = fields(*r);
  EXPECT_EQ(std::vector<std::string>(f.begin() + 1, f.begin() + 7),
            (std::vector<std::string>{"", "/workspace", "3", "-c",
                                      "import sys\nprint(sys.argv)", "a b"}));
  r = request("timeout", {"--kill-after=5", "600", "python3", "-c", "pass", "/workspace/b"});
  ASSERT_TRUE(r);
  f = fields(*r);
  EXPECT_EQ(std::vector<std::string>(f.begin() + 1, f.begin() + 7),
            (std::vector<std::string>{"600", "/workspace", "3", "-c", "pass", "/workspace/b"}));
}

TEST(python_waiter, refuses_what_would_not_run_exactly_as_the_command) {
  EXPECT_FALSE(request("python3", {}));                          // reads stdin
  EXPECT_FALSE(request("python3", {"-"}));                       // stdin
  EXPECT_FALSE(request("python3", {"-u", "main.py"}));           // interpreter option
  EXPECT_FALSE(request("python3", {"-c"}));                      // -c without its code
  EXPECT_FALSE(request("python3", {"-I", "-c", "print(1)"}));    // interpreter option
  EXPECT_FALSE(request("python3", {"-m", "http.server"}));       // a module
  EXPECT_FALSE(request("python3", {""}));                        // no file
  EXPECT_FALSE(request("python", {"main.py"}));                  // another program
  EXPECT_FALSE(request("/usr/bin/python3", {"main.py"}));        // not the PATH's python3
  EXPECT_FALSE(request("sh", {"-c", "python3 main.py"}));        // a shell
  EXPECT_FALSE(request("timeout", {"5", "python3", "main.py"})); // TERM
  EXPECT_FALSE(request("timeout", {"-s", "KILL", "5", "python3", "main.py"}));     // spelled
  EXPECT_FALSE(request("timeout", {"--signal=KILL", "5", "python3", "main.py"}));  // KILL first
  EXPECT_FALSE(request("timeout", {"--kill-after=1", "5", "python3", "main.py"})); // not 5 s
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "5", "sh", "main.py"}));
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "5", "python3", "-u", "main.py"}));
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "-5", "python3", "main.py"}));
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "5x", "python3", "main.py"}));
  EXPECT_FALSE(
      request("timeout", {"--kill-after=5", "--kill-after=1", "5", "python3", "m.py"}));
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "5", "python3"}));
  EXPECT_FALSE(request("timeout", {"--kill-after=5", "5", "python3", "-c"}));
}

TEST(python_waiter, refuses_an_environment_that_changes_python_start_up) {
  for (auto name :
       {"PATH", "HOME", "TZ", "LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "PYTHONPATH",
        "PYTHONSAFEPATH", "PYTHONHOME", "PYTHONIOENCODING", "PYTHONUTF8"})
    EXPECT_FALSE(request("python3", {"main.py"}, {{name, "/somewhere"}})) << name;
  // The same values as the waiter's, and anything else, are fine.
  EXPECT_TRUE(request("python3", {"main.py"}, {{"HOME", "/workspace"}}));
  EXPECT_TRUE(request("python3", {"main.py"}, {{"PYTHONUNBUFFERED", "1"}}));
  EXPECT_TRUE(request("python3", {"main.py"}, {{"API_TOKEN", "x"}, {"MY_PYTHONPATH", "y"}}));
  // A waiter started with an image's PATH serves execs with that PATH only.
  auto image_path = std::string{"/opt/env/bin:"} + default_guest_path;
  auto image_waiter = exec_environment({{"PATH", image_path}});
  EXPECT_TRUE(python_waiter::request_for(
      {"python3", {"main.py"}}, exec_environment({{"PATH", image_path}}), image_waiter));
  EXPECT_FALSE(
      python_waiter::request_for({"python3", {"main.py"}}, exec_environment({}), image_waiter));
}

TEST(python_waiter, the_embedded_script_is_the_waiter) {
  std::string script = python_waiter_script;
  EXPECT_EQ(script.rfind("# guestflow python waiter", 0), 0u);
  EXPECT_NE(script.find("_run(*_main())"), std::string::npos);
}

TEST(python_waiter, a_runner_preload_also_gets_the_flow_runs_program_to_compile_ahead) {
  EXPECT_TRUE(waiter_preload_args({}).empty());
  EXPECT_EQ(waiter_preload_args({"pandas", "numpy"}),
            (std::vector<std::string>{"pandas,numpy"}));
  auto args = waiter_preload_args({"pandas", "guestflow:runner"});
  ASSERT_EQ(args.size(), 2u);
  EXPECT_EQ(args[0], "pandas,guestflow:runner");
  // Exactly the program serve sends a flow run's guest: the waiter matches it byte for byte.
  std::ifstream f{GUESTFLOW_SOURCE_DIR "/guest/unpack_run.py", std::ios::binary};
  std::stringstream unpack;
  unpack << f.rdbuf();
  EXPECT_EQ(args[1], unpack.str());
}

} // namespace
} // namespace guestflow::local
