// What crosses into a run's guest and back, end to end through `guestflow run` on the real
// local control plane: streamed tokens and stored messages come back as events, the
// session reaches the guest's graph, and a secret given with --var reaches a component
// while no event, output, error or file the host keeps ever holds it.

#include "messages/run.hpp"
#include "tests/integration/runtime/flows.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <iterator>

using namespace guestflow;
using namespace guestflow::testing;

namespace {

namespace fs = std::filesystem;

class state_test : public runtime_fixture {
protected:
  control_plane_process::outcome run(std::vector<std::string> args,
                                     std::map<std::string, std::string> extra = {}) {
    args.insert(args.begin(), "run");
    return cli(args, std::move(extra));
  }

  /// Every line of an `--events` run, decoded (a line that does not decode fails the test).
  static std::vector<run_event> events_of(const std::string& text) {
    std::vector<run_event> out;
    for (size_t at = 0, nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1) {
      auto e = decode<run_event>(text.substr(at, nl - at));
      EXPECT_TRUE(e) << text.substr(at, nl - at);
      if (e) out.push_back(std::move(*e));
    }
    return out;
  }

  /// The files under `root` that contain `needle`, read in chunks. Files over 64 MiB are
  /// skipped (`skipped` names them): the warm pool's sparse workspace images, whose guests
  /// never ran this test's flows.
  static std::vector<std::string> files_holding(const fs::path& root, const std::string& needle,
                                                std::vector<std::string>& skipped) {
    constexpr std::uintmax_t largest = std::uintmax_t{64} << 20;
    std::vector<std::string> hits;
    std::error_code ec;
    std::vector<char> buf(size_t{1} << 20);
    for (fs::recursive_directory_iterator
             it{root, fs::directory_options::skip_permission_denied, ec},
         end;
         it != end; it.increment(ec)) {
      if (ec) break;
      if (it->is_symlink(ec) || !it->is_regular_file(ec)) continue;
      if (it->file_size(ec) > largest) {
        skipped.push_back(it->path().string());
        continue;
      }
      std::ifstream in{it->path(), std::ios::binary};
      std::string window; // the chunk and the tail of the one before: a match across chunks
      while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        window.append(buf.data(), static_cast<size_t>(in.gcount()));
        if (window.find(needle) != std::string::npos) {
          hits.push_back(it->path().string());
          break;
        }
        if (window.size() >= needle.size()) window.erase(0, window.size() - needle.size() + 1);
      }
    }
    return hits;
  }
};

/// A TextInput whose value is the variable `name` (`load_from_db`, as Langflow exports a
/// field bound to a global variable) → a Python Interpreter running `code_json` → Chat Output.
std::string secret_flow(const std::string& name, const std::string& code_json) {
  return R"({"nodes":[)" +
         node("key", "TextInput",
              R"({"input_value":{"value":")" + name + R"(","load_from_db":true}})") +
         "," +
         node("py", "PythonREPLComponent",
              R"({"global_imports":{"value":""},"python_code":{"value":)" + code_json + "}}") +
         "," + node("out", "ChatOutput", R"({"input_value":{"value":""}})") + R"(],"edges":[)" +
         edge("key", "text", "py", "input_value") + "," +
         edge("py", "results", "out", "input_value") + "]}";
}

} // namespace

TEST_F(state_test, a_streamed_output_arrives_as_token_events_before_its_vertex_is_built) {
  // The Python Interpreter's last expression is a generator: drained as Langflow drains a
  // streaming output, one token per chunk, and the vertex's result is the whole text.
  auto f = file("stream.json", python_flow(R"j("(c for c in ['Hel', 'lo, ', 'world'])")j"));
  auto r = run({f, "--input", "x", "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  auto evs = events_of(r.stdout_text);
  std::vector<std::string> chunks;
  std::string message_id;
  size_t built_at = 0;
  for (size_t i = 0; i < evs.size(); ++i) {
    if (evs[i].type == run_event::kind::token) {
      EXPECT_EQ(evs[i].id, "py");
      EXPECT_EQ(built_at, 0u) << "a token after its vertex was built";
      auto line = encode(evs[i]);
      auto chunk_at = line.find(R"("chunk":")");
      ASSERT_NE(chunk_at, std::string::npos) << line;
      chunks.push_back(line.substr(chunk_at + 9, line.find('"', chunk_at + 9) - chunk_at - 9));
      EXPECT_NE(line.find(R"(,"id":")"), std::string::npos) << "the message id: " << line;
    }
    if (evs[i].type == run_event::kind::vertex_built && evs[i].id == "py") built_at = i;
  }
  EXPECT_EQ(chunks, (std::vector<std::string>{"Hel", "lo, ", "world"})) << r.stdout_text;
  EXPECT_GT(built_at, 0u);
  ASSERT_FALSE(evs.empty());
  EXPECT_EQ(evs.back().type, run_event::kind::complete) << evs.back().message;
  auto& built = evs[built_at];
  EXPECT_NE(built.result().text.find("Hello, world"), std::string::npos) << built.result().text;
  EXPECT_NE(built.types().text.find(R"("results":"Data")"), std::string::npos)
      << built.types().text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(state_test, the_session_reaches_the_guest_and_stored_messages_come_back_as_events) {
  auto r =
      run({example("hello"), "--input", "remember me", "--session-id", "sess-42", "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  auto evs = events_of(r.stdout_text);
  std::vector<std::string> stored;
  for (auto& e : evs)
    if (e.type == run_event::kind::message) {
      EXPECT_NE(e.data().text.find(R"("session_id":"sess-42")"), std::string::npos)
          << e.data().text;
      stored.push_back(e.id);
    }
  EXPECT_FALSE(stored.empty()) << "Chat Input stores its message in a session: "
                               << r.stdout_text;
  ASSERT_FALSE(evs.empty());
  ASSERT_EQ(evs.back().type, run_event::kind::complete) << evs.back().message;
  // The guest's graph had the session: the Chat Output's message carries it.
  auto outputs = encode(evs.back().run_outputs_list);
  EXPECT_NE(outputs.find(R"("session_id":"sess-42")"), std::string::npos) << outputs;
}

TEST_F(state_test, a_secret_reaches_its_component_and_is_found_nowhere_else) {
  const std::string secret = "sk-guestflow-SECRET-4242";
  // The code prints the secret, returns it, lists what the runner left in its directory and
  // echoes spec.json (which must not hold it either).
  auto code = R"j("import os\nprint('key=' + input_value)\n)j"
              R"j(print('run dir:', sorted(os.listdir('/tmp/run')))\n)j"
              R"j(print('spec holds it:', input_value in open('/tmp/run/spec.json').read())\n)j"
              R"j(print('key again: ' + input_value)")j";
  auto f = file("secret.json", secret_flow("MY_TOKEN", code));
  auto r = run({f, "--var", "MY_TOKEN=" + secret, "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(secret), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stderr_text.find(secret), std::string::npos) << r.stderr_text;
  // It reached the component: what the code printed (its logs, its result, the output)
  // shows the mask where the value was.
  EXPECT_NE(r.stdout_text.find("key=********"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("spec holds it: False"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("variables.json"), std::string::npos)
      << "the runner unlinks variables.json before any vertex: " << r.stdout_text;
  auto evs = events_of(r.stdout_text);
  ASSERT_FALSE(evs.empty());
  ASSERT_EQ(evs.back().type, run_event::kind::complete) << evs.back().message;
  EXPECT_NE(encode(evs.back().run_outputs_list).find("key again: ********"), std::string::npos);
  // A failure whose text holds the secret: masked in the error and the --json body too.
  auto boom =
      file("boom.json", secret_flow("MY_TOKEN", R"j("raise ValueError(input_value)")j"));
  auto failed = run({boom, "--var", "MY_TOKEN=" + secret, "--json"});
  EXPECT_EQ(failed.status, 1) << failed.stderr_text;
  EXPECT_NE(failed.stdout_text.find("ValueError: ********"), std::string::npos)
      << failed.stdout_text;
  EXPECT_EQ(failed.stdout_text.find(secret), std::string::npos) << failed.stdout_text;
  EXPECT_EQ(failed.stderr_text.find(secret), std::string::npos) << failed.stderr_text;
  // What the runner cannot mask: the secret on the guest's stderr, then the runner gone
  // without its done frame. The host quotes stderr in the error; it masks the secret there.
  auto crash = file("crash.json", secret_flow("MY_TOKEN", R"j("import os\n)j"
                                                          R"j(os.write(2, ('stderr has '+)j"
                                                          R"j(input_value+'\\n').encode())\n)j"
                                                          R"j(os._exit(3)")j"));
  auto crashed = run({crash, "--var", "MY_TOKEN=" + secret, "--events"});
  EXPECT_EQ(crashed.status, 1) << crashed.stderr_text;
  auto crash_events = events_of(crashed.stdout_text);
  ASSERT_FALSE(crash_events.empty());
  EXPECT_EQ(crash_events.back().type, run_event::kind::error);
  EXPECT_NE(crash_events.back().message.find("stderr has ********"), std::string::npos)
      << crash_events.back().message;
  EXPECT_EQ(crashed.stdout_text.find(secret), std::string::npos) << crashed.stdout_text;
  EXPECT_EQ(crashed.stderr_text.find(secret), std::string::npos) << crashed.stderr_text;
  // Nothing the host keeps holds it: the CLI's state dir, the control plane's records and
  // whatever else lives under the test's directory.
  EXPECT_TRUE(wait_for_live(0));
  std::vector<std::string> skipped;
  EXPECT_EQ(files_holding(dir.path(), secret, skipped), std::vector<std::string>{})
      << dir.path();
  for (auto& big : skipped)
    EXPECT_EQ(big.find("workspace"), std::string::npos) << "a file too large to read: " << big;
}

TEST_F(state_test, a_secret_streamed_in_pieces_is_masked_whole_across_its_token_events) {
  // A model that echoes its key streams it in tokens: no one chunk holds the secret, so
  // only the stream as a whole can be masked (the runner masks frame by frame).
  const std::string secret = "sk-guestflow-STREAMED-777";
  auto f = file("split.json",
                secret_flow("MY_TOKEN", R"j("(c for c in ['key: ', input_value[:5], )j"
                                        R"j(input_value[5:14], input_value[14:], ' end'])")j"));
  auto r = run({f, "--var", "MY_TOKEN=" + secret, "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  std::string streamed;
  for (auto& e : events_of(r.stdout_text))
    if (e.type == run_event::kind::token) {
      auto at = e.data().text.find(R"("chunk":")");
      ASSERT_NE(at, std::string::npos) << e.data().text;
      at += 9;
      streamed += e.data().text.substr(at, e.data().text.find('"', at) - at);
    }
  EXPECT_EQ(streamed, "key: ******** end") << r.stdout_text;
  for (auto piece : {secret.substr(0, 14), secret.substr(5, 14), secret.substr(11)})
    EXPECT_EQ(r.stdout_text.find(piece), std::string::npos) << piece << " in " << r.stdout_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(state_test, a_variable_the_run_lacks_fails_before_any_vertex_naming_it_not_a_value) {
  auto f = file("unset.json", secret_flow("MY_TOKEN", R"j("print(input_value)")j"));
  auto r = run({f, "--var", "OTHER=sk-unrelated-value-77", "--events"});
  EXPECT_EQ(r.status, 2) << r.stderr_text << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("vertex_"), std::string::npos) << r.stdout_text;
  auto evs = events_of(r.stdout_text);
  ASSERT_FALSE(evs.empty());
  EXPECT_EQ(evs.back().code, ec::bad_request);
  EXPECT_NE(evs.back().message.find("MY_TOKEN"), std::string::npos) << evs.back().message;
  EXPECT_EQ(r.stdout_text.find("sk-unrelated-value-77"), std::string::npos) << r.stdout_text;
  EXPECT_TRUE(wait_for_live(0));
}
