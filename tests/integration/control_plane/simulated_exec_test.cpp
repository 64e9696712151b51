// `guestflow control-plane --simulate-latency-ms N --simulate-exec-stdout FILE` (bench-only):
// every exec, buffered or streamed, prints FILE's content on stdout and exits 0, through
// the real transport (exec pump, NDJSON streaming); a bad FILE refuses to start.
#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <fstream>
#include <gtest/gtest.h>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

/// Lines of guest-runner frames, plus non-ASCII text and more than one 64 KiB pump read,
/// so that chunking and UTF-8 repair at read boundaries are exercised.
std::string canned_text() {
  std::string text = R"({"t":"vertex_start","id":"ChatInput-1","name":"Chat Input – é"})"
                     "\n";
  for (int i = 0; i < 2000; ++i)
    text += R"({"t":"note","stdout":"line )" + std::to_string(i) +
            R"( ünïcödé 漢字"})"
            "\n";
  text += R"({"t":"done"})"
          "\n";
  return text;
}

class simulated_exec : public ::testing::Test {
protected:
  void SetUp() override {
    canned_ = canned_text();
    ASSERT_GT(canned_.size(), 64u * 1024);
    file_ = dir_.path() / "frames.ndjson";
    std::ofstream{file_} << canned_;
    cp_ = std::make_unique<control_plane_process>(
        dir_.path() / "state",
        std::vector<std::string>{"--simulate-latency-ms", "1", "--simulate-exec-stdout",
                                 file_.string()});
  }
  void TearDown() override {
    if (cp_) {
      EXPECT_EQ(cp_->stop(), 0) << cp_->stderr_text();
    }
  }

  /// `data` of a JSend success reply, decoded as T.
  template<class T>
  static T data(const http_reply& r) {
    EXPECT_EQ(r.status, 200u) << r.body;
    auto env = decode<jsend>(r.body);
    EXPECT_TRUE(env) << r.body;
    if (!env) return T{};
    auto v = decode<T>(env->data.text);
    EXPECT_TRUE(v) << r.body;
    return v ? *v : T{};
  }

  std::string create() {
    http_client c{cp_->port()};
    return data<sandbox_created>(
               c.call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb"})"))
        .id;
  }

  static std::string exec_body() {
    exec_request req;
    req.cmd = "python3";
    req.args = {"/workspace/run/runner.py", "/workspace/run/spec.json"};
    return encode(req);
  }

  test_support::temp_dir dir_{"guestflow-cp-test"};
  std::filesystem::path file_;
  std::string canned_;
  std::unique_ptr<control_plane_process> cp_;
};

TEST_F(simulated_exec, buffered_exec_returns_the_file_as_stdout_every_time) {
  auto id = create();
  ASSERT_FALSE(id.empty());
  http_client c{cp_->port()};
  for (int i = 0; i < 2; ++i) { // each exec prints it afresh
    auto r = data<exec_result>(c.call("POST", "/v1/sandboxes/" + id + "/exec", exec_body()));
    EXPECT_EQ(r.stdout_text, canned_);
    EXPECT_EQ(r.stderr_text, "");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_FALSE(r.error);
  }
}

TEST_F(simulated_exec, streamed_exec_returns_the_file_as_stdout_chunks_then_exit_zero) {
  auto id = create();
  ASSERT_FALSE(id.empty());
  http_client c{cp_->port()};
  http_stream s{c, "POST", "/v1/sandboxes/" + id + "/exec?stream=true", exec_body()};
  ASSERT_EQ(s.status(), 200u);
  std::string out;
  std::optional<int32_t> exit_code;
  while (auto line = s.next_line(20s)) {
    auto l = decode<exec_stream_line>(*line);
    ASSERT_TRUE(l) << *line;
    ASSERT_FALSE(exit_code) << "a line after the exit code: " << *line;
    switch (l->type) {
    case exec_stream_line::kind::stdout_chunk:
      out += l->text;
      break;
    case exec_stream_line::kind::exit_code:
      exit_code = l->exit_code;
      break;
    case exec_stream_line::kind::heartbeat:
      break;
    default:
      ADD_FAILURE() << "unexpected line " << *line;
    }
  }
  EXPECT_EQ(out, canned_);
  EXPECT_EQ(exit_code, 0);
}

TEST(simulated_exec_refusal, an_unreadable_file_or_no_simulation_is_refused_at_start) {
  test_support::temp_dir dir{"guestflow-cp-test"};
  auto missing = (dir.path() / "missing.ndjson").string();
  auto o = control_plane_process::run_to_exit({"control-plane", "--listen", "127.0.0.1:0",
                                               "--simulate-latency-ms", "1",
                                               "--simulate-exec-stdout", missing});
  EXPECT_EQ(o.status, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find(missing), std::string::npos) << o.stderr_text;
  EXPECT_EQ(o.stdout_text, "");

  std::ofstream{dir.path() / "f"} << "{\"t\":\"done\"}\n";
  o = control_plane_process::run_to_exit(
      {"control-plane", "--listen", "127.0.0.1:0", "--state-dir",
       (dir.path() / "state").string(), "--simulate-exec-stdout", (dir.path() / "f").string()});
  EXPECT_EQ(o.status, 2) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("needs --simulate-latency-ms"), std::string::npos)
      << o.stderr_text;
  EXPECT_EQ(o.stdout_text, "");
}

} // namespace
} // namespace guestflow::testing
