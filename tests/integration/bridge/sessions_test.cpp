// Agent sessions over HTTP (bridge/API.md "Sessions"): a real `guestflow serve`, a real
// local control plane and real guests.

#include "messages/base64.hpp"
#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/support/eventually.hpp"

#include <filesystem>
#include <fstream>
#include <future>
#include <gtest/gtest.h>
#include <set>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;
using test_support::eventually;

class sessions : public bridge_fixture {
protected:
  void SetUp() override {
    runtime_fixture::SetUp();
    start_serve(
        {{"GUESTFLOW_SESSION_REPLICAS", "2"}, {"GUESTFLOW_DOWNLOAD_PREFIX", "/workspace"}});
  }

  /// The control plane's view of session `id`'s guest (nullopt: none left).
  std::optional<sandbox_view> guest_of(const std::string& id) const {
    for (auto& g : live_guests())
      if (g.name == id) return g;
    return std::nullopt;
  }

  bool stopped(const std::string& id) const {
    auto g = guest_of(id);
    return g && g->status == sandbox_status::stopped;
  }

  /// POST /v1/sessions for (user, thread).
  http_reply acquire(const std::string& user, const std::string& thread) const {
    return call("POST", "/v1/sessions",
                "{\"user_id\":\"" + user + "\",\"thread_id\":\"" + thread + "\"}");
  }

  /// The session_id of an answer.
  static std::string id_of(const http_reply& r) {
    auto k = r.body.find("\"session_id\":\"");
    if (k == std::string::npos) return {};
    k += 14;
    return r.body.substr(k, r.body.find('"', k) - k);
  }

  std::string active(const std::string& thread) const {
    auto r = acquire("alice", thread);
    EXPECT_EQ(r.status, 200u) << r.body;
    return id_of(r);
  }

  bool gone(const std::string& id) const {
    for (auto& g : live_guests())
      if (g.name == id) return false;
    return true;
  }

  /// %XX for every byte but unreserved ones: any name, any bytes.
  static std::string pct(const std::string& bytes) {
    static constexpr char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : bytes) {
      if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
        out.push_back(static_cast<char>(c));
      } else {
        out.push_back('%');
        out.push_back(hex[c >> 4]);
        out.push_back(hex[c & 15]);
      }
    }
    return out;
  }

  http_reply run(const std::string& id, const std::string& body,
                 const std::string& query = {}) const {
    return call("POST", "/v1/sessions/" + id + "/commands" + query, body);
  }

  http_reply file(const std::string& method, const std::string& id, const std::string& op,
                  const std::string& path, const std::string& query = {},
                  const std::string& body = {}) const {
    return call(method, "/v1/sessions/" + id + "/files/" + op + "?path=" + pct(path) + query,
                body);
  }
};

/// Python's json.dumps(ensure_ascii=True) of UTF-8 text: how the guest tool names paths.
std::string py_json(const std::string& text) {
  std::string out = "\"";
  char buf[8];
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\f') {
      out += "\\f";
    } else if (c < 0x20) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c == 0xc2 && i + 1 < text.size()) { // U+0080..U+00BF
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

TEST_F(sessions, OneGuestPerUserAndThreadReleasedIntoTheWarmPoolAndEvictedAtTheCap) {
  auto a = active("t1");
  ASSERT_EQ(a.size(), 22u);
  auto again = acquire("alice", "t1");
  EXPECT_EQ(id_of(again), a);
  EXPECT_NE(again.body.find("\"reused\":true"), std::string::npos) << again.body;
  auto b = active("t2");
  EXPECT_NE(a, b);
  // Both replicas are active: a third conversation is refused at once, nothing evicted.
  auto full = acquire("alice", "t3");
  EXPECT_EQ(full.status, 429u) << full.body;
  EXPECT_NE(full.body.find("capacity"), std::string::npos);
  EXPECT_EQ(call("GET", "/v1/sessions/" + a).status, 200u);
  // Released: warm, reclaimable by the same thread (same guest).
  auto rel = call("POST", "/v1/sessions/" + a + "/release");
  EXPECT_EQ(rel.status, 200u) << rel.body;
  EXPECT_NE(rel.body.find("\"state\":\"warm\""), std::string::npos) << rel.body;
  auto back = acquire("alice", "t1");
  EXPECT_EQ(id_of(back), a);
  EXPECT_NE(back.body.find("\"state\":\"active\""), std::string::npos) << back.body;
  // Released again, then a new thread at the cap evicts it (the only warm guest): stopped,
  // its memory freed and its files kept, not deleted.
  ASSERT_EQ(call("POST", "/v1/sessions/" + a + "/release").status, 200u);
  auto c = active("t3");
  auto got = call("GET", "/v1/sessions/" + a);
  EXPECT_EQ(got.status, 200u);
  EXPECT_NE(got.body.find("\"state\":\"stopped\""), std::string::npos) << got.body;
  EXPECT_TRUE(stopped(a));
  EXPECT_FALSE(gone(b));
  EXPECT_FALSE(gone(c));
  // Commands need an active session.
  EXPECT_EQ(run(a, R"({"command":"true"})").status, 400u);
  // DELETE deletes the guest.
  auto del = call("DELETE", "/v1/sessions/" + b);
  EXPECT_EQ(del.status, 200u) << del.body;
  EXPECT_TRUE(eventually([&] { return gone(b); }, 30s));
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + b).status, 404u);
  EXPECT_EQ(call("POST", "/v1/sessions", R"({"user_id":"x"})").status, 400u);
}

TEST_F(sessions, ConcurrentAcquiresOfOneThreadGetOneGuest) {
  std::vector<std::future<http_reply>> calls;
  for (int i = 0; i < 6; ++i)
    calls.push_back(std::async(std::launch::async, [this] { return acquire("bob", "same"); }));
  std::set<std::string> ids;
  for (auto& f : calls) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200u) << r.body;
    ids.insert(id_of(r));
  }
  ASSERT_EQ(ids.size(), 1u);
  size_t n = 0;
  for (auto& g : live_guests())
    n += g.name == *ids.begin();
  EXPECT_EQ(n, 1u);
}

TEST_F(sessions, WarmGuestsIdlePastTheTimeoutStopAndAStoppedServerKeepsEveryGuest) {
  start_serve({{"GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", "1"}});
  auto a = active("idle");
  auto b = active("kept");
  ASSERT_EQ(run(a, R"({"command":"echo a > /mnt/user-data/workspace/a"})").status, 200u);
  ASSERT_EQ(run(b, R"({"command":"echo b > /mnt/user-data/workspace/b"})").status, 200u);
  ASSERT_EQ(call("POST", "/v1/sessions/" + a + "/release").status, 200u);
  EXPECT_TRUE(eventually([&] { return stopped(a); }, 30s));
  EXPECT_NE(call("GET", "/v1/sessions/" + a).body.find("\"state\":\"stopped\""),
            std::string::npos);
  EXPECT_FALSE(stopped(b)); // active: never idles out
  EXPECT_EQ(serve->stop(), 0);
  // A stop of the server deletes nothing: a new server finds each thread's guest by name.
  EXPECT_FALSE(gone(a));
  EXPECT_FALSE(gone(b));
  start_serve({});
  EXPECT_EQ(active("idle"), a);
  EXPECT_EQ(active("kept"), b);
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/workspace/a").body, "a\n");
  EXPECT_EQ(file("GET", b, "read", "/mnt/user-data/workspace/b").body, "b\n");
}

/// The memory limit the host's cgroup gives guest `guest_id` (v2 memory.max, else v1
/// memory.limit_in_bytes), "" when neither file is there.
std::string cgroup_memory_limit(const std::string& guest_id) {
  for (auto& f : {"/sys/fs/cgroup/guestflow/" + guest_id + "/memory.max",
                  "/sys/fs/cgroup/unified/guestflow/" + guest_id + "/memory.max",
                  "/sys/fs/cgroup/memory/guestflow/" + guest_id + "/memory.limit_in_bytes"}) {
    std::ifstream in{f};
    std::string v;
    if (in >> v) return v;
  }
  return {};
}

TEST_F(sessions, MemoryMibAndCpusPickTheGuestsShapeAndItsMemoryLimitBinds) {
  // Python in the guest fills 600 MiB: room with memory_mib 1024, the OOM killer at the
  // server's default shape (256 MiB).
  const std::string fill =
      R"({"command":"python3 -c \"b = bytearray(600 << 20); print('filled')\""})";
  auto big = call("POST", "/v1/sessions",
                  R"({"user_id":"alice","thread_id":"big","memory_mib":1024})");
  ASSERT_EQ(big.status, 200u) << big.body;
  auto a = id_of(big);
  ASSERT_TRUE(guest_of(a));
  EXPECT_EQ(guest_of(a)->shape, "s-1vcpu-1gb");
  EXPECT_EQ(cgroup_memory_limit(guest_of(a)->id), std::to_string(1024ull << 20));
  auto ok = run(a, fill);
  EXPECT_NE(ok.body.find(R"("stdout":"filled\n")"), std::string::npos) << ok.body;
  EXPECT_NE(ok.body.find(R"("exit_code":0)"), std::string::npos) << ok.body;
  ASSERT_EQ(call("POST", "/v1/sessions/" + a + "/release").status, 200u);

  auto small = active("small");
  ASSERT_TRUE(guest_of(small));
  EXPECT_EQ(guest_of(small)->shape, "s-1vcpu-256mb");
  EXPECT_EQ(cgroup_memory_limit(guest_of(small)->id), std::to_string(256ull << 20));
  auto killed = run(small, fill);
  EXPECT_EQ(killed.body.find("filled"), std::string::npos) << killed.body;
  EXPECT_EQ(killed.body.find(R"("exit_code":0)"), std::string::npos) << killed.body;
  ASSERT_EQ(call("POST", "/v1/sessions/" + small + "/release").status, 200u);

  // cpus: the smallest shape with that many vCPUs (the guest's CPU weight).
  auto two = call("POST", "/v1/sessions", R"({"user_id":"alice","thread_id":"two","cpus":2})");
  ASSERT_EQ(two.status, 200u) << two.body;
  ASSERT_TRUE(guest_of(id_of(two)));
  EXPECT_EQ(guest_of(id_of(two))->shape, "s-2vcpu-2gb");

  // The same thread with another size is refused: its guest was made with this one.
  auto other = call("POST", "/v1/sessions",
                    R"({"user_id":"alice","thread_id":"big","memory_mib":2048})");
  EXPECT_EQ(other.status, 400u) << other.body;
  EXPECT_NE(other.body.find("memory_mib or cpus"), std::string::npos) << other.body;
}

TEST_F(sessions, MemoryOverTheServersLimitsIsRefusedNamingTheKeyAndNothingIsMade) {
  start_serve({{"GUESTFLOW_SESSION_MAX_MEMORY_MIB", "1024"}});
  auto sessions = [&] {
    size_t n = 0;
    for (auto& g : live_guests())
      n += g.name.rfind("gf-s-", 0) == 0 ? 1 : 0;
    return n;
  };
  auto before = sessions();
  struct refusal {
    const char* body;
    unsigned status;
    const char* says;
  };
  for (auto [extra, status, says] : {
           refusal{R"("memory_mib":2048)", 403,
                   "memory_mib: 2048 is over the server's maximum of 1024 MiB "
                   "(GUESTFLOW_SESSION_MAX_MEMORY_MIB)"},
           refusal{R"("cpus":2)", 403,
                   "cpus: 2 needs shape s-2vcpu-2gb (2048 MiB, 2 vCPU), over the server's "
                   "maximum of 1024 MiB"},
           refusal{R"("memory_mib":20000)", 400,
                   "memory_mib: 20000 is more than the largest shape has, s-4vcpu-16gb "
                   "(16384 MiB, 4 vCPU)"},
           refusal{R"("cpus":64)", 400, "cpus: 64 is more than the largest shape has"},
           refusal{R"("idle_timeout_seconds":604801)", 400,
                   "idle_timeout_seconds: 604801 out of range (expected 0..604800)"},
       }) {
    auto r = call("POST", "/v1/sessions",
                  std::string{R"({"user_id":"alice","thread_id":"huge",)"} + extra + "}");
    EXPECT_EQ(r.status, status) << extra << ": " << r.body;
    EXPECT_NE(r.body.find(says), std::string::npos) << r.body;
  }
  EXPECT_EQ(sessions(), before);
  EXPECT_EQ(call("POST", "/v1/sessions",
                 R"({"user_id":"alice","thread_id":"huge","memory_mib":1024})")
                .status,
            200u);
}

TEST_F(sessions, EachSessionsIdleTimeoutStopsItsWarmGuest) {
  // The server's own timeout is a day: only the sessions' own stop anything here.
  start_serve({{"GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", "86400"},
               {"GUESTFLOW_SESSION_REPLICAS", "3"}});
  auto quick = call("POST", "/v1/sessions",
                    R"({"user_id":"alice","thread_id":"quick","idle_timeout_seconds":2})");
  ASSERT_EQ(quick.status, 200u) << quick.body;
  auto q = id_of(quick);
  auto server = active("server");
  ASSERT_EQ(run(q, R"({"command":"echo kept > /mnt/user-data/workspace/f"})").status, 200u);
  auto released = std::chrono::steady_clock::now();
  ASSERT_EQ(call("POST", "/v1/sessions/" + server + "/release").status, 200u);
  ASSERT_EQ(call("POST", "/v1/sessions/" + q + "/release").status, 200u);
  EXPECT_TRUE(eventually([&] { return stopped(q); }, 30s));
  // Not before its 2 s.
  EXPECT_GE(std::chrono::steady_clock::now() - released, 2s);
  EXPECT_NE(call("GET", "/v1/sessions/" + q).body.find("\"state\":\"stopped\""),
            std::string::npos);
  // Released first, under the server's day: still warm and running.
  EXPECT_NE(call("GET", "/v1/sessions/" + server).body.find("\"state\":\"warm\""),
            std::string::npos);
  EXPECT_FALSE(stopped(server));
  // Woken with its files; 0 (DeerFlow's "disabled") keeps it running once released.
  auto back = call("POST", "/v1/sessions",
                   R"({"user_id":"alice","thread_id":"quick","idle_timeout_seconds":0})");
  ASSERT_EQ(back.status, 200u) << back.body;
  EXPECT_EQ(file("GET", q, "read", "/mnt/user-data/workspace/f").body, "kept\n");
  ASSERT_EQ(call("POST", "/v1/sessions/" + q + "/release").status, 200u);
  auto again = call("POST", "/v1/sessions",
                    R"({"user_id":"alice","thread_id":"third","idle_timeout_seconds":1})");
  ASSERT_EQ(again.status, 200u) << again.body;
  auto t = id_of(again);
  ASSERT_EQ(call("POST", "/v1/sessions/" + t + "/release").status, 200u);
  // The 1 s session, released after the 0 one, stops; the 0 one is still warm then.
  EXPECT_TRUE(eventually([&] { return stopped(t); }, 30s));
  EXPECT_NE(call("GET", "/v1/sessions/" + q).body.find("\"state\":\"warm\""),
            std::string::npos);
  EXPECT_FALSE(stopped(q));
}

TEST_F(sessions, CommandsRunWithEnvCwdAndATimeoutThatKillsTheGroup) {
  auto id = active("cmd");
  auto r = run(
      id, R"J({"command":"echo out; echo err >&2; echo \"$GREETING\"; pwd; cat; echo done",)J"
          R"J("env":{"GREETING":"hi there; $(id)"}, "cwd": "/tmp"})J");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find(R"J("stdout":"out\nhi there; $(id)\n/tmp\ndone\n")J"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(R"("stderr":"err\n")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("exit_code":0)"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("timed_out":false)"), std::string::npos) << r.body;
  auto ordered = run(id, R"({"command":"echo a; sleep 0.2; echo b >&2; sleep 0.2; echo c"})");
  EXPECT_NE(ordered.body.find(R"("output":"a\nb\nc\n")"), std::string::npos) << ordered.body;
  auto code = run(id, R"({"command":"exit 7"})");
  EXPECT_NE(code.body.find(R"("exit_code":7)"), std::string::npos) << code.body;
  EXPECT_EQ(run(id, R"({"command":"true","env":{"BAD-KEY":"x"}})").status, 400u);
  EXPECT_EQ(run(id, R"({"command":"true","env":{"1X":"x"}})").status, 400u);
  // A background child in the command's group dies with it at the timeout.
  auto t = run(
      id, R"({"command":"(sleep 300; touch /tmp/survived) & sleep 300","timeout_seconds":1})");
  ASSERT_EQ(t.status, 200u) << t.body;
  EXPECT_NE(t.body.find(R"("timed_out":true)"), std::string::npos) << t.body;
  EXPECT_NE(t.body.find(R"("exit_code":-1)"), std::string::npos) << t.body;
  auto ps = run(
      id,
      R"({"command":"for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '^sleep 300' || true"})");
  EXPECT_NE(ps.body.find(R"("stdout":"0\n")"), std::string::npos) << ps.body;
  auto s = run(id, R"({"command":"echo x; echo y >&2; exit 3"})", "?stream=true");
  ASSERT_EQ(s.status, 200u);
  EXPECT_EQ(s.body, "{\"stdout\":\"x\\n\"}\n{\"stderr\":\"y\\n\"}\n"
                    "{\"exit_code\":3,\"timed_out\":false}\n");
}

/// The next line of a stream that is not a heartbeat (blank).
std::optional<std::string> next_event(http_stream& s) {
  for (;;) {
    auto line = s.next_line(60s);
    if (!line || !line->empty()) return line;
  }
}

TEST_F(sessions, AStreamedCommandWritesEachLineAsTheGuestPrintsIt) {
  auto id = active("live");
  // The command cannot end before the test creates /workspace/go: its first line arriving
  // first is the proof that the answer is live, not buffered.
  auto s =
      stream("POST", "/v1/sessions/" + id + "/commands?stream=true",
             R"({"command":"echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done;)"
             R"( echo second >&2; exit 4","timeout_seconds":120})");
  ASSERT_EQ(s->status(), 200u);
  EXPECT_EQ(s->headers().at("content-type"), "application/x-ndjson");
  EXPECT_EQ(next_event(*s), std::optional<std::string>{R"({"stdout":"first\n"})"});
  auto go = file("PUT", id, "write", "/workspace/go", "", "x");
  ASSERT_EQ(go.status, 200u) << go.body;
  EXPECT_EQ(next_event(*s), std::optional<std::string>{R"({"stderr":"second\n"})"});
  EXPECT_EQ(next_event(*s), std::optional<std::string>{R"({"exit_code":4,"timed_out":false})"});
  EXPECT_EQ(next_event(*s), std::nullopt);
  // Refusals before the command starts are plain error answers.
  auto unknown = run("gf-b-no-such-session", R"({"command":"true"})", "?stream=true");
  EXPECT_EQ(unknown.status, 404u) << unknown.body;
  EXPECT_NE(unknown.body.find("not_found"), std::string::npos) << unknown.body;
  // A client that goes away kills the command (its whole process group).
  auto gone = stream("POST", "/v1/sessions/" + id + "/commands?stream=true",
                     R"({"command":"echo up; sleep 297 & sleep 297; echo never"})");
  ASSERT_EQ(gone->status(), 200u);
  EXPECT_EQ(next_event(*gone), std::optional<std::string>{R"({"stdout":"up\n"})"});
  gone->disconnect();
  auto count =
      R"({"command":"for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null | grep -c '^sleep 297' || true"})";
  auto running = [&](const std::string& n) {
    return eventually(
        [&] {
          return run(id, count).body.find(R"("stdout":")" + n + R"(\n")") != std::string::npos;
        },
        30s);
  };
  EXPECT_TRUE(running("0")) << run(id, count).body;
  // So does a client of a buffered command that goes away before its answer.
  auto buffered = stream("POST", "/v1/sessions/" + id + "/commands",
                         R"({"command":"sleep 297 & sleep 297; echo never"})");
  EXPECT_TRUE(running("2")) << run(id, count).body;
  buffered->disconnect();
  EXPECT_TRUE(running("0")) << run(id, count).body;
}

TEST_F(sessions, AStopEndsRunningCommandsWithUnavailable) {
  auto id = active("stop");
  auto streamed = stream("POST", "/v1/sessions/" + id + "/commands?stream=true",
                         R"({"command":"echo up; sleep 295"})");
  EXPECT_EQ(next_event(*streamed), std::optional<std::string>{R"({"stdout":"up\n"})"});
  auto buffered = stream("POST", "/v1/sessions/" + id + "/commands",
                         R"({"command":"touch /workspace/b; sleep 295"})");
  EXPECT_TRUE(
      eventually([&] { return file("GET", id, "read", "/workspace/b").status == 200; }, 30s));
  // SIGTERM: both commands are killed and answered unavailable, well within the bound.
  auto stopped = std::async(std::launch::async, [this] { return serve->stop(); });
  auto last = next_event(*streamed);
  ASSERT_TRUE(last);
  EXPECT_EQ(last->rfind(R"({"error":{"code":"unavailable")", 0), 0u) << *last;
  EXPECT_EQ(next_event(*streamed), std::nullopt);
  EXPECT_EQ(buffered->status(), 503u);
  EXPECT_EQ(stopped.get(), 0);
  EXPECT_FALSE(gone(id)); // the session's files outlive the server
}

TEST_F(sessions, CommandsTakeAnExecutionSlot) {
  start_serve({{"GUESTFLOW_MAX_INFLIGHT", "1"}, {"GUESTFLOW_SESSION_REPLICAS", "2"}});
  auto id = active("slots");
  auto held =
      stream("POST", "/v1/sessions/" + id + "/commands?stream=true",
             R"({"command":"echo held; while [ ! -e /workspace/free ]; do sleep 0.05; done"})");
  ASSERT_EQ(held->status(), 200u);
  EXPECT_EQ(next_event(*held), std::optional<std::string>{R"({"stdout":"held\n"})"});
  // The one slot is the held command's: another command (buffered or streamed) and a
  // sandbox run are refused at once with 429 capacity; file calls take no slot.
  auto full = run(id, R"({"command":"echo no"})");
  EXPECT_EQ(full.status, 429u) << full.body;
  EXPECT_NE(full.body.find("capacity"), std::string::npos) << full.body;
  EXPECT_EQ(run(id, R"({"command":"echo no"})", "?stream=true").status, 429u);
  EXPECT_EQ(call("POST", "/v1/sandbox/run", R"J({"code":"print(1)"})J").status, 429u);
  ASSERT_EQ(file("PUT", id, "write", "/workspace/free", "", "x").status, 200u);
  EXPECT_EQ(next_event(*held),
            std::optional<std::string>{R"({"exit_code":0,"timed_out":false})"});
  EXPECT_EQ(next_event(*held), std::nullopt);
  // Given back when the command ended, whatever its outcome.
  auto after = run(id, R"({"command":"exit 9"})");
  EXPECT_EQ(after.status, 200u) << after.body;
  EXPECT_NE(after.body.find(R"("exit_code":9)"), std::string::npos) << after.body;
  EXPECT_EQ(run(id, R"({"command":"echo again"})").status, 200u);
}

TEST_F(sessions, GlobAndGrepFiltersMatchThePathRelativeToTheRootAndSkipDeerFlowsIgnores) {
  auto id = active("search");
  for (auto p : {"src/a.py", "src/deep/b.py", "top.py", "node_modules/x.py", "build/out.py",
                 "app.log", "notes.md"})
    ASSERT_EQ(file("PUT", id, "write", std::string{"/workspace/s/"} + p, "", "needle\n").status,
              200u);
  auto has = [](const http_reply& r, const std::string& rel) {
    return r.body.find("\"/workspace/s/" + rel + "\"") != std::string::npos;
  };
  auto grep = [&](const std::string& glob, const std::string& root = "/workspace/s") {
    auto r = file("GET", id, "grep", root, "&pattern=needle&glob=" + pct(glob));
    EXPECT_EQ(r.status, 200u) << r.body;
    return r;
  };
  // A filter with a "/" is anchored at the root: src/*.py is not src/deep/b.py.
  auto anchored = grep("src/*.py");
  EXPECT_TRUE(has(anchored, "src/a.py")) << anchored.body;
  EXPECT_FALSE(has(anchored, "src/deep/b.py")) << anchored.body;
  EXPECT_FALSE(has(anchored, "top.py")) << anchored.body;
  auto deep = grep("src/**/*.py");
  EXPECT_TRUE(has(deep, "src/a.py") && has(deep, "src/deep/b.py")) << deep.body;
  EXPECT_FALSE(has(deep, "top.py")) << deep.body;
  // Without a "/", the name at any depth; DeerFlow's ignored names are skipped.
  auto named = grep("*.py");
  for (auto p : {"src/a.py", "src/deep/b.py", "top.py"})
    EXPECT_TRUE(has(named, p)) << p << "\n" << named.body;
  EXPECT_FALSE(has(named, "node_modules/x.py") || has(named, "build/out.py")) << named.body;
  // A file as the root: the filter sees its name.
  EXPECT_TRUE(has(grep("top.py", "/workspace/s/top.py"), "top.py"));
  EXPECT_FALSE(has(grep("src/*.py", "/workspace/s/top.py"), "top.py"));
  auto glob = file("GET", id, "glob", "/workspace/s", "&pattern=" + pct("*.py"));
  for (auto p : {"src/a.py", "src/deep/b.py", "top.py"})
    EXPECT_TRUE(has(glob, p)) << p << "\n" << glob.body;
  EXPECT_FALSE(has(glob, "node_modules/x.py")) << glob.body;
  auto all = file("GET", id, "glob", "/workspace/s", "&pattern=" + pct("*.py") + "&ignore=0");
  EXPECT_TRUE(has(all, "node_modules/x.py") && has(all, "build/out.py")) << all.body;
  // list: the ignores too, and never the runtime's own staging directory.
  auto list = file("GET", id, "list", "/workspace/s");
  EXPECT_TRUE(has(list, "notes.md")) << list.body;
  EXPECT_FALSE(has(list, "app.log") || has(list, "node_modules") || has(list, "build"))
      << list.body;
  auto everything = file("GET", id, "list", "/workspace/s", "&ignore=0");
  EXPECT_TRUE(has(everything, "app.log") && has(everything, "node_modules")) << everything.body;
  auto ws = file("GET", id, "list", "/workspace", "&ignore=0&max_depth=1");
  EXPECT_EQ(ws.body.find(".gf-session"), std::string::npos) << ws.body;
  // max_depth=0: nothing below the path (DeerFlow's list_dir), but the path must exist.
  auto zero = file("GET", id, "list", "/workspace/s", "&max_depth=0");
  EXPECT_EQ(zero.status, 200u) << zero.body;
  EXPECT_EQ(zero.body, R"({"entries":[],"truncated":false})");
  EXPECT_EQ(file("GET", id, "list", "/workspace/nope", "&max_depth=0").status, 404u);
  EXPECT_EQ(file("GET", id, "list", "/workspace/s", "&max_depth=65").status, 400u);
  EXPECT_EQ(file("GET", id, "list", "/workspace/s", "&ignore=2").status, 400u);
}

TEST_F(sessions, NamesRoundTripByteExactThroughEveryFileCall) {
  auto id = active("files");
  const std::vector<std::string> names = {
      " lead",        "trail ",      "new\nline", "tab\tx",      "v\vf\f",
      "\x1c\x1d\x1e", "nel\xc2\x85", "raw\x85",   "bad\xff\xfe", "both  "};
  for (auto& n : names) {
    auto content = "hello " + n + "\nsecond\n";
    auto w = file("PUT", id, "write", "/workspace/t/" + n, "", content);
    ASSERT_EQ(w.status, 200u) << w.body;
  }
  auto list = file("GET", id, "list", "/workspace/t");
  ASSERT_EQ(list.status, 200u) << list.body;
  auto glob = file("GET", id, "glob", "/workspace", "&pattern=t/*");
  ASSERT_EQ(glob.status, 200u) << glob.body;
  auto grep = file("GET", id, "grep", "/workspace/t", "&pattern=hello");
  ASSERT_EQ(grep.status, 200u) << grep.body;
  for (auto& n : names) {
    auto path = "/workspace/t/" + n;
    bool utf8 = n.find('\x85') == std::string::npos || n.find("\xc2\x85") != std::string::npos;
    utf8 = utf8 && n.find('\xff') == std::string::npos;
    auto expect =
        utf8 ? "\"path\":" + py_json(path) : "\"path_b64\":\"" + base64_encode(path) + "\"";
    EXPECT_NE(list.body.find(expect), std::string::npos) << expect << "\n" << list.body;
    EXPECT_NE(glob.body.find(expect), std::string::npos) << expect << "\n" << glob.body;
    EXPECT_NE(grep.body.find(expect), std::string::npos) << expect << "\n" << grep.body;
    auto read = file("GET", id, "read", path);
    EXPECT_EQ(read.body, "hello " + n + "\nsecond\n");
    auto line = file("GET", id, "read", path, "&start_line=2&end_line=2");
    EXPECT_EQ(line.body, n.find('\n') == std::string::npos ? "second\n" : "line\n");
    auto down = file("GET", id, "download", path);
    EXPECT_EQ(down.status, 200u);
    EXPECT_EQ(down.body, "hello " + n + "\nsecond\n");
  }
  auto app = file("PUT", id, "write", "/workspace/t/trail ", "&append=1", "third\n");
  ASSERT_EQ(app.status, 200u) << app.body;
  EXPECT_EQ(file("GET", id, "read", "/workspace/t/trail ").body,
            "hello trail \nsecond\nthird\n");
  auto upd = file("PUT", id, "update", "/workspace/t/trail ", "", std::string("\0\x01\xff", 3));
  ASSERT_EQ(upd.status, 200u) << upd.body;
  EXPECT_EQ(file("GET", id, "download", "/workspace/t/trail ").body,
            std::string("\0\x01\xff", 3));
}

TEST_F(sessions, TraversalDirectoriesMissingPathsAndTheCapAreTypedErrors) {
  start_serve({{"GUESTFLOW_DOWNLOAD_CAP_BYTES", "1000"},
               {"GUESTFLOW_MAX_BODY_BYTES", "4096"},
               {"GUESTFLOW_DOWNLOAD_PREFIX", "/workspace"}});
  auto id = active("edges");
  // A write over the body cap: 413 before it is read, nothing written.
  auto over = file("PUT", id, "write", "/workspace/over", "", std::string(5000, 'x'));
  EXPECT_EQ(over.status, 413u) << over.body;
  EXPECT_EQ(file("GET", id, "read", "/workspace/over").status, 404u);
  EXPECT_EQ(file("PUT", id, "write", "/workspace/a/../b", "", "x").status, 403u);
  EXPECT_EQ(file("GET", id, "read", "/workspace/../etc/passwd").status, 403u);
  EXPECT_EQ(file("GET", id, "download", "/etc/passwd").status, 403u);
  auto ln = run(
      id,
      R"({"command":"mkdir -p /workspace/d && ln -sf /etc/passwd /workspace/esc && head -c 2000 /dev/zero > /workspace/big"})");
  ASSERT_EQ(ln.status, 200u) << ln.body;
  EXPECT_EQ(file("GET", id, "download", "/workspace/esc").status, 403u);
  EXPECT_EQ(file("GET", id, "download", "/workspace/big").status, 413u);
  EXPECT_EQ(file("GET", id, "download", "/workspace/d").status, 400u);
  EXPECT_EQ(file("GET", id, "read", "/workspace/d").status, 400u);
  auto dir = file("PUT", id, "write", "/workspace/d", "", "x");
  EXPECT_EQ(dir.status, 400u) << dir.body;
  EXPECT_EQ(file("PUT", id, "write", "/workspace/big/under", "", "x").status, 400u);
  EXPECT_EQ(file("GET", id, "list", "/workspace/missing").status, 404u);
  EXPECT_EQ(file("GET", id, "read", "/workspace/missing").status, 404u);
  EXPECT_EQ(file("GET", id, "download", "/workspace/missing").status, 404u);
  EXPECT_EQ(file("GET", id, "list", "relative").status, 400u);
  // Nothing was written by the refusals.
  auto ls =
      run(id, R"({"command":"ls -A /workspace; cat /workspace/d/* 2>/dev/null; ls /b 2>&1"})");
  EXPECT_EQ(ls.body.find("under"), std::string::npos) << ls.body;
  EXPECT_EQ(file("GET", id, "list", "/workspace").body.find("/workspace/b\""),
            std::string::npos);
}

/// DeerFlow's side (issue 37): host directories the operator allows, a thread directory
/// with uploads, the guests' persistent paths.
class deerflow_sessions : public sessions {
protected:
  std::filesystem::path roots, skills, thread;

  void SetUp() override {
    runtime_fixture::SetUp();
    roots = dir.path() / "roots";
    skills = dir.path() / "skills";
    thread = roots / "threads" / "t1" / "user-data";
    std::filesystem::create_directories(thread / "uploads" / "sub");
    std::filesystem::create_directories(skills / "public");
    std::ofstream{skills / "public" / "SKILL.md"} << "skill\n";
    std::ofstream{thread / "uploads" / "in.txt", std::ios::binary} << "uploaded\n";
    std::ofstream{thread / "uploads" / "sub" / "b\xff y", std::ios::binary} << "raw";
    std::ofstream{dir.path() / "secret"} << "secret\n";
    std::filesystem::create_symlink(dir.path() / "secret", thread / "uploads" / "link");
    // The guest runs as its own uid: the host directories it may write must let it.
    for (auto& d : {roots, skills, skills / "public"})
      std::filesystem::permissions(d, std::filesystem::perms::all);
    // The control plane binds only under its own roots: the same variables as serve.
    cp = std::make_unique<control_plane_process>(dir.path() / "cp-deerflow",
                                                 std::vector<std::string>{}, deerflow_env({}));
    start_serve(deerflow_env({{"GUESTFLOW_SESSION_REPLICAS", "3"}}));
  }

  std::map<std::string, std::string> deerflow_env(std::map<std::string, std::string> extra) {
    extra.emplace("GUESTFLOW_SESSION_MOUNT_ROOTS", roots.string());
    extra.emplace("GUESTFLOW_SESSION_SKILLS_DIR", skills.string());
    return extra;
  }

  http_reply acquire_thread(const std::string& thread_id, const std::string& extra = {}) {
    return call("POST", "/v1/sessions",
                R"({"user_id":"u","thread_id":")" + thread_id + R"(","thread_dir":")" +
                    (roots / "threads" / thread_id / "user-data").string() + "\"" + extra +
                    "}");
  }

  std::string shell(const std::string& id, const std::string& command) {
    std::string body = "{\"command\":" + quote_json(command) + "}";
    auto r = run(id, body);
    EXPECT_EQ(r.status, 200u) << r.body;
    return r.body;
  }

  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream in{p, std::ios::binary};
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

TEST_F(deerflow_sessions, AFreshThreadHasDeerFlowsPathsAndItsFirstCdSucceeds) {
  auto r = acquire_thread("fresh");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto id = id_of(r);
  // DeerFlow's bash tool prefixes every command with this cd.
  auto out = shell(id, "cd /mnt/user-data/workspace && pwd && ls /mnt/user-data && "
                       "ls /mnt/skills/public && test -d /mnt/acp-workspace && echo acp && "
                       "(touch /mnt/skills/x 2>/dev/null && echo writable || echo read-only)");
  EXPECT_NE(out.find(R"("stdout":"/mnt/user-data/workspace\noutputs\nuploads\nworkspace\n)"
                     R"(SKILL.md\nacp\nread-only\n")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(R"("exit_code":0)"), std::string::npos) << out;
}

TEST_F(deerflow_sessions, FourThreadsOnThreeReplicasLoseNoFileAndOutputsReachTheHost) {
  auto first = acquire_thread("t1");
  ASSERT_EQ(first.status, 200u) << first.body;
  auto a = id_of(first);
  // The thread's uploads are in, byte-exact; a symlink is never followed out.
  EXPECT_NE(first.body.find(R"("synced_files":2)"), std::string::npos) << first.body;
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/uploads/in.txt").body, "uploaded\n");
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/uploads/sub/b\xff y").body, "raw");
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/uploads/link").status, 404u);
  shell(a, "echo report > '/mnt/user-data/outputs/r\xc3\xa9sum\xc3\xa9.md' && "
           "mkdir -p /mnt/user-data/outputs/charts && printf png > "
           "/mnt/user-data/outputs/charts/c.png && echo kept > /mnt/user-data/workspace/w && "
           "ln -s /etc/passwd /mnt/user-data/outputs/passwd");
  auto rel = call("POST", "/v1/sessions/" + a + "/release");
  ASSERT_EQ(rel.status, 200u) << rel.body;
  EXPECT_NE(rel.body.find(R"("synced_files":2)"), std::string::npos) << rel.body;
  // The outputs are in the thread's host directory; the link was not copied.
  EXPECT_EQ(slurp(thread / "outputs" / "r\xc3\xa9sum\xc3\xa9.md"), "report\n");
  EXPECT_EQ(slurp(thread / "outputs" / "charts" / "c.png"), "png");
  EXPECT_FALSE(std::filesystem::exists(thread / "outputs" / "passwd"));
  // Three more threads with three replicas: the first one's guest is stopped for room.
  std::vector<std::string> others;
  for (auto t : {"t2", "t3", "t4"}) {
    auto r = acquire_thread(t);
    ASSERT_EQ(r.status, 200u) << r.body;
    others.push_back(id_of(r));
  }
  EXPECT_TRUE(stopped(a));
  ASSERT_EQ(call("POST", "/v1/sessions/" + others[0] + "/release").status, 200u);
  // It comes back (waking its guest, stopping t2's): every file is there.
  auto back = acquire_thread("t1");
  ASSERT_EQ(back.status, 200u) << back.body;
  EXPECT_EQ(id_of(back), a);
  EXPECT_NE(back.body.find("\"reused\":true"), std::string::npos) << back.body;
  EXPECT_TRUE(stopped(others[0]));
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/uploads/in.txt").body, "uploaded\n");
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/workspace/w").body, "kept\n");
  EXPECT_EQ(file("GET", a, "read", "/mnt/user-data/outputs/charts/c.png").body, "png");
  EXPECT_NE(shell(a, "cd /mnt/user-data/workspace && cat w").find("kept"), std::string::npos);
  // Outputs past the sync's cap: refused whole, the session stays active.
  shell(a, "head -c 2048 /dev/zero > /mnt/user-data/outputs/big");
  start_serve(deerflow_env({{"GUESTFLOW_SESSION_SYNC_CAP_BYTES", "1024"}}));
  ASSERT_EQ(acquire_thread("t1").status, 200u);
  auto capped = call("POST", "/v1/sessions/" + a + "/release");
  EXPECT_EQ(capped.status, 413u) << capped.body;
  EXPECT_FALSE(std::filesystem::exists(thread / "outputs" / "big"));
  EXPECT_NE(call("GET", "/v1/sessions/" + a).body.find("\"state\":\"active\""),
            std::string::npos);
}

TEST_F(deerflow_sessions, MountsOnlyUnderTheOperatorsRoots) {
  auto data = roots / "data";
  auto rw = roots / "rw";
  std::filesystem::create_directories(data);
  std::filesystem::create_directories(rw);
  std::filesystem::permissions(rw, std::filesystem::perms::all);
  std::ofstream{data / "d.csv"} << "1,2\n";
  auto mounts = R"(,"mounts":[{"host_path":")" + data.string() +
                R"(","container_path":"/mnt/data","read_only":true},{"host_path":")" +
                rw.string() + R"(","container_path":"/mnt/rw","read_only":false}])";
  auto r = acquire_thread("m", mounts);
  ASSERT_EQ(r.status, 200u) << r.body;
  auto id = id_of(r);
  auto out = shell(id, "cat /mnt/data/d.csv; (echo x > /mnt/data/y) 2>/dev/null || echo ro; "
                       "echo w > /mnt/rw/out && echo rw");
  EXPECT_NE(out.find(R"("stdout":"1,2\nro\nrw\n")"), std::string::npos) << out;
  EXPECT_EQ(slurp(rw / "out"), "w\n");
  // Another thread asking for a directory outside the roots, or a link out of them.
  std::filesystem::create_directory_symlink(dir.path(), roots / "escape");
  for (auto bad : {dir.path().string(), (roots / "escape").string()}) {
    auto refused = acquire_thread("m2", R"(,"mounts":[{"host_path":")" + bad +
                                            R"(","container_path":"/mnt/x"}])");
    EXPECT_EQ(refused.status, 403u) << refused.body;
    EXPECT_NE(refused.body.find("policy_refused"), std::string::npos) << refused.body;
    EXPECT_NE(refused.body.find(roots.string()), std::string::npos) << refused.body;
  }
  auto outside =
      call("POST", "/v1/sessions",
           R"({"user_id":"u","thread_id":"m3","thread_dir":")" + dir.path().string() + R"("})");
  EXPECT_EQ(outside.status, 403u) << outside.body;
  // The same thread with other mounts is another guest: refused until it is deleted.
  EXPECT_EQ(acquire_thread("m").status, 400u);
}

TEST_F(deerflow_sessions, TheRetentionDeletesAStoppedGuestAndOnlyThen) {
  start_serve(deerflow_env({{"GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", "1"},
                            {"GUESTFLOW_SESSION_RETENTION_SECONDS", "3"}}));
  auto id = id_of(acquire_thread("ret"));
  ASSERT_FALSE(id.empty());
  shell(id, "echo x > /mnt/user-data/workspace/x");
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/release").status, 200u);
  EXPECT_TRUE(eventually([&] { return stopped(id); }, 30s));
  EXPECT_TRUE(eventually([&] { return gone(id); }, 60s));
  EXPECT_TRUE(
      eventually([&] { return call("GET", "/v1/sessions/" + id).status == 404u; }, 30s));
  // A new acquire of the thread starts afresh.
  auto again = acquire_thread("ret");
  ASSERT_EQ(again.status, 200u) << again.body;
  EXPECT_EQ(file("GET", id, "read", "/mnt/user-data/workspace/x").status, 404u);
  // DELETE deletes a session's guest at once, files and all.
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200u);
  EXPECT_TRUE(eventually([&] { return gone(id); }, 30s));
}

TEST_F(deerflow_sessions, AStoppedGuestKeepsItsMountsAcrossAControlPlaneRestart) {
  start_serve(deerflow_env({{"GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", "1"}}));
  auto id = id_of(acquire_thread("t1"));
  ASSERT_FALSE(id.empty());
  shell(id, "echo kept > /mnt/user-data/workspace/k");
  ASSERT_EQ(call("POST", "/v1/sessions/" + id + "/release").status, 200u);
  EXPECT_TRUE(eventually([&] { return stopped(id); }, 30s));
  EXPECT_EQ(serve->stop(), 0);
  // The control plane restarts on its state dir: the stopped guest's mounts come from its
  // record (without them the wake would find an empty /mnt/user-data).
  EXPECT_EQ(cp->stop(), 0);
  cp = std::make_unique<control_plane_process>(dir.path() / "cp-deerflow",
                                               std::vector<std::string>{}, deerflow_env({}));
  start_serve(deerflow_env({}));
  auto back = acquire_thread("t1");
  ASSERT_EQ(back.status, 200u) << back.body;
  EXPECT_EQ(id_of(back), id);
  EXPECT_EQ(file("GET", id, "read", "/mnt/user-data/workspace/k").body, "kept\n");
  EXPECT_NE(shell(id, "ls /mnt/skills/public").find("SKILL.md"), std::string::npos);
}

} // namespace
} // namespace guestflow::testing
