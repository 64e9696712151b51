// A session's memory and a run's secrets, end to end with real guests: through `guestflow
// serve` (POST /v1/runs with `session_id`, `history`, `variables`) and through the CLI
// (`guestflow run --session-id --var --var-from-env`). Two runs of a memory chatbot in two
// fresh guests remember; a secret reaches a component and is found nowhere else; a
// streaming component's tokens arrive before its vertex ends.

#include "messages/flow_run.hpp"
#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/integration/runtime/flows.hpp"
#include "tests/support/eventually.hpp"

#include <algorithm>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <openssl/sha.h>
#include <random>
#include <sstream>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

/// A Chat Input's or Chat Output's template as Langflow exports it: it stores its message,
/// and has the `session_id` field the run's session id is set on.
std::string chat_template(const char* sender, const char* name) {
  return std::string{R"({"input_value":{"value":""},"should_store_message":{"value":true},)"} +
         R"("sender":{"value":")" + sender + R"("},"sender_name":{"value":")" + name +
         R"("},"session_id":{"value":""}})";
}

/// ChatInput → Prompt ← Message History (Memory), Prompt → ChatOutput: the memory chatbot
/// of Langflow's starter projects with the model left out (the prompt is the answer).
std::string memory_chatbot() {
  return R"({"nodes":[)" + node("ChatInput-in", "ChatInput", chat_template("User", "User")) +
         "," +
         node("Memory-m", "Memory",
              R"({"n_messages":{"value":100},"order":{"value":"Ascending"},)"
              R"("sender_type":{"value":"Machine and User"},"sender_name":{"value":""},)"
              R"("session_id":{"value":""},"template":{"value":"{sender_name}: {text}"}})") +
         "," +
         node("Prompt-p", "Prompt",
              R"({"template":{"value":"History:\n{history}\nNow: {question}"}})") +
         "," + node("ChatOutput-out", "ChatOutput", chat_template("Machine", "AI")) +
         R"(],"edges":[)" + edge("ChatInput-in", "message", "Prompt-p", "question") + "," +
         edge("Memory-m", "messages_text", "Prompt-p", "history") + "," +
         edge("Prompt-p", "prompt", "ChatOutput-out", "input_value") + "]}";
}

/// ChatInput → Python Interpreter (which takes a second) → ChatOutput.
std::string slow_chat() {
  return R"({"nodes":[)" + node("ChatInput-in", "ChatInput", chat_template("User", "User")) +
         "," +
         node("py", "PythonREPLComponent",
              R"({"global_imports":{"value":""},"python_code":{"value":)" +
                  quote_json("import time\ntime.sleep(1)\nprint('answer to ' + input_value)") +
                  "}}") +
         "," + node("ChatOutput-out", "ChatOutput", chat_template("Machine", "AI")) +
         R"(],"edges":[)" + edge("ChatInput-in", "message", "py", "input_value") + "," +
         edge("py", "results", "ChatOutput-out", "input_value") + "]}";
}

/// TextInput (its text a `load_from_db` variable) → Python Interpreter → ChatOutput. The
/// interpreter proves it got the value (its SHA-256), lists /tmp/run and searches
/// every file under /workspace and /tmp (the run's directory) for the value while the run is
/// going on.
std::string secret_flow(const std::string& variable) {
  const std::string code = "import hashlib, os, stat\n"
                           "hits = []\n"
                           "for root, _, files in [*os.walk('/workspace'), *os.walk('/tmp')]:\n"
                           "    for f in files:\n"
                           "        p = os.path.join(root, f)\n"
                           "        try:\n"
                           "            if not stat.S_ISREG(os.lstat(p).st_mode):\n"
                           "                continue\n"
                           "            with open(p, 'rb') as fh:\n"
                           "                if secret.encode() in fh.read():\n"
                           "                    hits.append(p)\n"
                           "        except OSError:\n"
                           "            pass\n"
                           "print('sha256=' + hashlib.sha256(secret.encode()).hexdigest())\n"
                           "print('run_dir=' + ','.join(sorted(os.listdir('/tmp/run'))))\n"
                           "print('hits=' + repr(hits))\n";
  return R"({"nodes":[)" +
         node("secret_text", "TextInput",
              R"({"input_value":{"value":")" + variable + R"(","load_from_db":true}})") +
         "," +
         node("py", "PythonREPLComponent",
              R"({"global_imports":{"value":""},"python_code":{"value":)" + quote_json(code) +
                  "}}") +
         "," + node("out", "ChatOutput", R"({"input_value":{"value":""}})") + R"(],"edges":[)" +
         edge("secret_text", "text", "py", "secret") + "," +
         edge("py", "results", "out", "input_value") + "]}";
}

/// ChatInput → Python Interpreter whose last expression is a generator (a streaming
/// model's stand-in) → ChatOutput.
std::string streaming_flow() {
  return python_flow(quote_json("(chunk for chunk in ['al', 'pha', ' be', 'ta'])"));
}

/// A value no file can hold by chance.
std::string fresh_secret() {
  std::random_device rd;
  std::ostringstream out;
  out << "gf-secret-" << std::hex << rd() << rd() << rd();
  return out.str();
}

std::string sha256_hex(const std::string& s) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  std::ostringstream out;
  for (auto b : digest)
    out << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(b);
  return out.str();
}

std::string slurp(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// Whether the file holds `needle` anywhere in its data. Only the extents that hold data are
/// read (SEEK_DATA / SEEK_HOLE): the local control plane keeps 16 GiB sparse disk images
/// in its state dir; a needle without a NUL byte never lies across a hole.
bool file_contains(const fs::path& p, const std::string& needle) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  auto end = ::lseek(fd, 0, SEEK_END);
  std::string window;
  std::vector<char> chunk(size_t{1} << 20);
  bool found = false;
  for (off_t pos = 0; pos < end && !found;) {
    auto data = ::lseek(fd, pos, SEEK_DATA);
    if (data < 0) break; // no data past pos
    auto hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) hole = end;
    if (data != pos) window.clear();
    for (off_t at = data; at < hole && !found;) {
      auto want = std::min<off_t>(hole - at, static_cast<off_t>(chunk.size()));
      auto n = ::pread(fd, chunk.data(), static_cast<size_t>(want), at);
      if (n <= 0) break;
      window.append(chunk.data(), static_cast<size_t>(n));
      found = window.find(needle) != std::string::npos;
      if (window.size() > needle.size()) window.erase(0, window.size() - needle.size());
      at += n;
    }
    pos = hole;
  }
  ::close(fd);
  return found;
}

/// Every regular file under `root` that contains `needle`.
std::vector<std::string> files_containing(const fs::path& root, const std::string& needle) {
  std::vector<std::string> out;
  std::error_code err;
  for (fs::recursive_directory_iterator
           it{root, fs::directory_options::skip_permission_denied, err},
       end;
       it != end; it.increment(err)) {
    if (err) break;
    if (it->is_regular_file(err) && !it->is_symlink(err) && file_contains(it->path(), needle))
      out.push_back(it->path().string());
  }
  return out;
}

size_t lines_of(const fs::path& p) {
  auto text = slurp(p);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

class memory_test : public bridge_fixture {
protected:
  fs::path messages_dir() const { return dir.path() / "runtime" / "messages"; }

  control_plane_process::outcome run(std::vector<std::string> args,
                                     std::map<std::string, std::string> extra = {}) {
    args.insert(args.begin(), "run");
    return cli(args, std::move(extra));
  }

  /// POST /v1/runs streamed: every event, and the raw bytes of the answer.
  std::vector<run_event> stream_run(const std::string& flow, const std::string& extra,
                                    std::string* raw = nullptr) {
    auto s = stream("POST", "/v1/runs", "{\"flow\":" + flow + "," + extra + "}");
    EXPECT_EQ(s->status(), 200u);
    std::vector<run_event> out;
    while (auto line = s->next_line(120s)) {
      if (raw) *raw += *line + "\n";
      if (line->empty()) continue;
      auto e = decode<run_event>(*line);
      EXPECT_TRUE(e) << *line;
      if (!e) break;
      out.push_back(std::move(*e));
    }
    return out;
  }

  /// The final chat text of a streamed run (its complete event's outputs).
  static std::string answer_of(const std::vector<run_event>& events) {
    if (events.empty() || events.back().type != run_event::kind::complete) {
      ADD_FAILURE() << (events.empty() ? "no events" : events.back().message);
      return {};
    }
    return encode(events.back().run_outputs_list);
  }
};

size_t count(const std::vector<run_event>& events, run_event::kind k) {
  return static_cast<size_t>(std::count_if(events.begin(), events.end(),
                                           [k](const run_event& e) { return e.type == k; }));
}

} // namespace

TEST_F(memory_test, two_cli_runs_with_one_session_id_remember_the_first) {
  auto flow = file("memory.json", memory_chatbot());
  auto first = run({flow, "--session-id", "chat-7", "--input", "my code word is blue-falcon"});
  ASSERT_EQ(first.status, 0) << first.stderr_text;
  EXPECT_TRUE(wait_for_live(0)); // the first guest is gone
  // Chat Input's and Chat Output's messages, in the state dir's store.
  auto stored = messages_dir() / "chat-7.ndjson";
  ASSERT_TRUE(fs::exists(stored));
  EXPECT_EQ(lines_of(stored), 2u);
  auto second = run({flow, "--session-id", "chat-7", "--input", "what was my code word?"});
  ASSERT_EQ(second.status, 0) << second.stderr_text;
  EXPECT_NE(second.stdout_text.find("User: my code word is blue-falcon"), std::string::npos)
      << second.stdout_text;
  EXPECT_EQ(lines_of(stored), 4u);
  // Another session remembers nothing of it.
  auto other = run({flow, "--session-id", "chat-8", "--input", "what was my code word?"});
  ASSERT_EQ(other.status, 0) << other.stderr_text;
  EXPECT_EQ(other.stdout_text.find("blue-falcon"), std::string::npos) << other.stdout_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, two_bridge_runs_with_one_session_id_remember_the_first) {
  auto flow = memory_chatbot();
  auto first = stream_run(flow, R"("inputs":"my code word is red-otter","session_id":"s 1")");
  ASSERT_FALSE(first.empty());
  ASSERT_EQ(first.back().type, run_event::kind::complete) << first.back().message;
  // Chat Input's and Chat Output's messages came as events, and serve stored each.
  EXPECT_EQ(count(first, run_event::kind::message), 2u);
  auto stored = messages_dir() / "s%201.ndjson";
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(stored) == 2; }, 10s));
  auto second = stream_run(flow, R"("inputs":"and now?","session_id":"s 1")");
  EXPECT_NE(answer_of(second).find("User: my code word is red-otter"), std::string::npos)
      << answer_of(second);
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(stored) == 4; }, 10s));
  // A caller that brings its own history owns the memory: serve neither reads nor stores.
  auto owned = stream_run(flow, R"("inputs":"and now?","session_id":"s 1","history":[])");
  EXPECT_EQ(answer_of(owned).find("red-otter"), std::string::npos) << answer_of(owned);
  EXPECT_EQ(count(owned, run_event::kind::message), 2u); // still told, not kept
  EXPECT_EQ(lines_of(stored), 4u);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, a_client_that_leaves_still_gets_its_run_stored) {
  {
    auto s = stream("POST", "/v1/runs",
                    "{\"flow\":" + slow_chat() + R"(,"inputs":"hello","session_id":"left"})");
    ASSERT_EQ(s->status(), 200u);
    ASSERT_TRUE(s->next_line(30s)); // the run has started; then the client goes
  }
  // Chat Output's message comes after the client left (the vertex before it takes a
  // second), and is stored all the same.
  auto stored = messages_dir() / "left.ndjson";
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(stored) == 2; }, 60s))
      << slurp(stored);
  EXPECT_NE(slurp(stored).find("answer to hello"), std::string::npos) << slurp(stored);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, a_session_id_the_store_cannot_take_is_refused_before_any_guest) {
  auto long_id = std::string(81, 'x');
  auto r = call("POST", "/v1/runs",
                "{\"flow\":" + memory_chatbot() + R"(,"stream":false,"session_id":")" +
                    long_id + "\"}");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_NE(r.body.find("session_id"), std::string::npos) << r.body;
  auto flow = file("memory.json", memory_chatbot());
  auto c = run({flow, "--session-id", long_id, "--input", "x"});
  EXPECT_EQ(c.status, 2);
  EXPECT_NE(c.stderr_text.find("--session-id"), std::string::npos) << c.stderr_text;
  // A path in an id is only ever a file name inside the store.
  auto p = run({flow, "--session-id", "../../escape", "--input", "x"});
  ASSERT_EQ(p.status, 0) << p.stderr_text;
  EXPECT_TRUE(fs::exists(messages_dir() / "%2E%2E%2F%2E%2E%2Fescape.ndjson"));
  EXPECT_FALSE(fs::exists(dir.path() / "escape.ndjson"));
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, a_secret_given_with_var_reaches_a_component_and_nothing_else) {
  auto secret = fresh_secret();
  auto flow = file("secret.json", secret_flow("GF_TEST_KEY"));
  auto r = run(
      {flow, "--events", "--session-id", "secret-session", "--var", "GF_TEST_KEY=" + secret});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto& events = r.stdout_text;
  EXPECT_NE(events.find("sha256=" + sha256_hex(secret)), std::string::npos) << events;
  // The runner read variables.json and unlinked it before any vertex ran, and no file of
  // the workspace or /tmp holds the value.
  EXPECT_NE(events.find("run_dir="), std::string::npos) << events;
  EXPECT_EQ(events.find("variables.json"), std::string::npos) << events;
  EXPECT_NE(events.find("hits=[]"), std::string::npos) << events;
  EXPECT_EQ(events.find(secret), std::string::npos);
  // It did pass through the events (Text Input's output), masked.
  EXPECT_NE(events.find(R"("text":"********")"), std::string::npos) << events;
  EXPECT_EQ(r.stderr_text.find(secret), std::string::npos);
  // The state dirs (the CLI's, its message store, the control plane's records) and every
  // file of the test.
  EXPECT_EQ(files_containing(dir.path(), secret), std::vector<std::string>{});
  // From the environment, the same.
  auto env_run =
      run({flow, "--json", "--var-from-env", "GF_TEST_KEY"}, {{"GF_TEST_KEY", secret}});
  ASSERT_EQ(env_run.status, 0) << env_run.stderr_text;
  EXPECT_NE(env_run.stdout_text.find("sha256=" + sha256_hex(secret)), std::string::npos)
      << env_run.stdout_text;
  EXPECT_EQ(env_run.stdout_text.find(secret), std::string::npos);
  EXPECT_EQ(env_run.stderr_text.find(secret), std::string::npos);
  EXPECT_EQ(files_containing(dir.path(), secret), std::vector<std::string>{});
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, a_secret_given_as_a_bridge_variable_reaches_a_component_and_nothing_else) {
  auto secret = fresh_secret();
  std::string raw;
  auto events = stream_run(
      secret_flow("GF_TEST_KEY"),
      R"("session_id":"secret-session","variables":{"GF_TEST_KEY":")" + secret + "\"}", &raw);
  auto text = answer_of(events);
  EXPECT_NE(text.find("sha256=" + sha256_hex(secret)), std::string::npos) << text;
  EXPECT_EQ(text.find("variables.json"), std::string::npos) << text;
  EXPECT_NE(text.find("hits=[]"), std::string::npos) << text;
  EXPECT_EQ(raw.find(secret), std::string::npos);
  EXPECT_NE(raw.find(R"("text":"********")"), std::string::npos) << raw;
  // The collected answer too.
  auto collected =
      call("POST", "/v1/runs",
           "{\"flow\":" + secret_flow("GF_TEST_KEY") +
               R"(,"stream":false,"variables":{"GF_TEST_KEY":")" + secret + "\"}}");
  ASSERT_EQ(collected.status, 200u) << collected.body;
  EXPECT_NE(collected.body.find("sha256=" + sha256_hex(secret)), std::string::npos);
  EXPECT_EQ(collected.body.find(secret), std::string::npos);
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  auto metrics = call("GET", "/metrics");
  EXPECT_EQ(metrics.body.find(secret), std::string::npos);
  // serve's log (its stderr is a file of the test), its state dir, the control plane's.
  EXPECT_EQ(serve->stderr_text().find(secret), std::string::npos);
  EXPECT_EQ(files_containing(dir.path(), secret), std::vector<std::string>{});
}

TEST_F(memory_test, a_missing_variable_fails_before_any_vertex_naming_it_never_a_value) {
  auto secret = fresh_secret();
  auto flow = file("secret.json", secret_flow("GF_OTHER_KEY"));
  auto r = run({flow, "--json", "--var", "GF_TEST_KEY=" + secret});
  EXPECT_EQ(r.status, 2); // bad_request: the caller's to fix
  EXPECT_NE(r.stdout_text.find(R"("code":"bad_request")"), std::string::npos) << r.stdout_text;
  EXPECT_NE((r.stdout_text + r.stderr_text).find("GF_OTHER_KEY"), std::string::npos)
      << r.stdout_text << r.stderr_text;
  EXPECT_EQ((r.stdout_text + r.stderr_text).find(secret), std::string::npos);
  EXPECT_EQ(r.stderr_text.find("✓"), std::string::npos) << r.stderr_text; // nothing built
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, cli_variable_mistakes_are_usage_errors_that_never_echo_a_value) {
  auto secret = fresh_secret();
  auto flow = file("secret.json", secret_flow("GF_TEST_KEY"));
  auto missing = run({flow, "--var-from-env", "GF_NOT_SET_ANYWHERE"});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.stderr_text.find("GF_NOT_SET_ANYWHERE is not set"), std::string::npos)
      << missing.stderr_text;
  for (auto bad : std::vector<std::vector<std::string>>{
           {"--var", secret},                                // no '='
           {"--var", "1X=" + secret},                        // not a name
           {"--var", "K=" + secret, "--var", "K=" + secret}, // twice
           {"--vars=K=" + secret},                           // a typo of the option
       }) {
    std::vector<std::string> args{flow};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = run(args);
    EXPECT_EQ(r.status, 2) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find(secret), std::string::npos) << r.stderr_text;
  }
  auto help = cli({"run", "--help"});
  EXPECT_NE(help.stdout_text.find("--var NAME=VALUE"), std::string::npos);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(memory_test, tokens_arrive_before_their_vertex_ends_on_both_surfaces) {
  auto check = [](const std::vector<run_event>& events) {
    std::string streamed;
    size_t tokens = 0;
    bool built = false;
    for (auto& e : events) {
      if (e.type == run_event::kind::vertex_built && e.id == "py") built = true;
      if (e.type != run_event::kind::token) continue;
      ++tokens;
      EXPECT_EQ(e.id, "py");
      EXPECT_FALSE(built) << "a token after its vertex was built";
      auto chunk = e.data().text.find(R"("chunk":")");
      ASSERT_NE(chunk, std::string::npos) << e.data().text;
      streamed +=
          e.data().text.substr(chunk + 9, e.data().text.find('"', chunk + 9) - chunk - 9);
    }
    EXPECT_EQ(tokens, 4u);
    EXPECT_EQ(streamed, "alpha beta");
    EXPECT_TRUE(built);
  };
  check(stream_run(streaming_flow(), R"("inputs":"x")"));
  auto flow = file("stream.json", streaming_flow());
  auto r = run({flow, "--input", "x", "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  std::vector<run_event> events;
  std::istringstream lines{r.stdout_text};
  for (std::string line; std::getline(lines, line);) {
    auto e = decode<run_event>(line);
    ASSERT_TRUE(e) << line;
    events.push_back(std::move(*e));
  }
  check(events);
}

TEST_F(memory_test, json_on_a_failed_flow_prints_the_error_body_and_exits_1) {
  auto flow = file("raise.json", python_flow(quote_json("raise ValueError('boom-42')")));
  auto r = run({flow, "--input", "x", "--json"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(R"("error")"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("boom-42"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("guest_failed"), std::string::npos) << r.stdout_text;
}
