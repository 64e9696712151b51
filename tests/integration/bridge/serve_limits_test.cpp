// What `guestflow serve` refuses, and how: execution slots shared by every surface (429 at
// once, never a queue), a caller gone cancels its run, body caps binding before the body is
// read, and malformed HTTP answered before the close.

#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/integration/control_plane/out_of_descriptors.hpp"
#include "tests/support/eventually.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class serve_limits_test : public bridge_fixture {
protected:
  /// A sandbox run that holds its guest until the test lets it go.
  static std::string sleeper_body() {
    return R"j({"code":"import time\ntime.sleep(300)","timeout_seconds":600})j";
  }

  /// What arrived on `fd` until `done(text)` or the deadline; "" if nothing did.
  static std::string read_until(int fd, const std::function<bool(const std::string&)>& done,
                                std::chrono::milliseconds deadline = 20s) {
    std::string got;
    auto end = std::chrono::steady_clock::now() + deadline;
    while (!done(got)) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) != 1) break;
      char buf[4096];
      auto n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }

  /// The status line and head of one answer, read from `fd`.
  static std::string answer_head(int fd) {
    auto got =
        read_until(fd, [](const std::string& s) { return s.find("\r\n\r\n") != s.npos; });
    return got;
  }

  /// Whether the server closed `fd` (EOF) within the deadline, after what it still sends.
  static bool closed_by_server(int fd) {
    auto end = std::chrono::steady_clock::now() + 20s;
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20'000) != 1) return false;
      auto n = ::read(fd, buf, sizeof buf);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
    return false;
  }

  static bool starts_with(const std::string& s, const std::string& prefix) {
    return s.compare(0, prefix.size(), prefix) == 0;
  }

  std::string auth() const { return "Authorization: Bearer " + token + "\r\n"; }

  static void send_all(int fd, const std::string& bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      auto n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      ASSERT_GT(n, 0) << "send failed: " << errno;
      sent += static_cast<size_t>(n);
    }
  }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_F(serve_limits_test, out_of_descriptors_it_waits_to_accept_and_then_serves) {
  start_serve({{"GUESTFLOW_WARM_POOL", "off"}}); // nothing of its own at work meanwhile
  expect_it_waits_to_accept_out_of_descriptors(serve->pid(), client(), "/healthz");
}

TEST_F(serve_limits_test, every_surface_shares_the_slots_and_is_refused_at_once_beyond_them) {
  start_serve({{"GUESTFLOW_MAX_INFLIGHT", "1"}});
  auto holder = stream("POST", "/v1/sandbox/run", sleeper_body());
  ASSERT_TRUE(wait_for_live(1));
  struct row {
    const char* target;
    std::string body;
  };
  std::vector<row> rows{
      {"/v1/sandbox/run", R"j({"code":"print(1)"})j"},
      {"/v1/components/run", R"j({"flow_id":"f","component_id":"c","program":"print(1)"})j"},
      {"/v1/runs", run_body("hello", R"("inputs":"x","stream":false)")},
      {"/v1/runs", run_body("hello", R"("inputs":"x")")},
  };
  for (auto& r : rows) {
    auto reply = call("POST", r.target, r.body);
    EXPECT_EQ(reply.status, 429u) << r.target << " " << reply.body;
    EXPECT_EQ(reply.headers["retry-after"], "1") << r.target;
    EXPECT_TRUE(contains(reply.body, R"("code":"capacity")")) << reply.body;
    EXPECT_TRUE(contains(reply.body, "GUESTFLOW_MAX_INFLIGHT")) << reply.body;
  }
  // Refused before the body is read: a head announcing 900 KB (within the cap) is answered
  // with no body sent.
  int fd = connect_raw();
  send_all(fd, "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth() +
                   "Content-Length: 900000\r\n\r\n");
  EXPECT_TRUE(starts_with(answer_head(fd), "HTTP/1.1 429 ")) << "no early 429";
  ::close(fd);
  EXPECT_EQ(live_guests().size(), 1u); // nothing refused made a guest
  // The caller that holds the slot goes away: its run is cancelled and its guest deleted.
  holder->disconnect();
  EXPECT_TRUE(test_support::eventually([&] { return live_guests().empty(); }, 60s, 20ms));
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  auto after = call("POST", "/v1/sandbox/run", R"j({"code":"print(7)"})j");
  EXPECT_EQ(after.status, 200u) << after.body; // the slot is free again
  EXPECT_TRUE(contains(after.body, "\"stdout\":\"7\\n\"")) << after.body;
}

TEST_F(serve_limits_test, back_to_back_runs_in_one_slot_wait_for_the_last_guests_delete) {
  // A run is answered before its guest's delete, and the guest keeps the slot until the
  // delete answered: the next run, sent at once, waits for that slot instead of a 429.
  start_serve({{"GUESTFLOW_MAX_INFLIGHT", "1"}, {"GUESTFLOW_MAX_QUEUED", "0"}});
  for (int i = 0; i < 6; ++i) {
    auto sandbox = call("POST", "/v1/sandbox/run",
                        R"j({"code":"print()j" + std::to_string(i) + R"j()"})j");
    EXPECT_EQ(sandbox.status, 200u) << i << " " << sandbox.body;
    EXPECT_TRUE(contains(sandbox.body, "\"stdout\":\"" + std::to_string(i) + "\\n\""))
        << sandbox.body;
    auto flow = call("POST", "/v1/runs", run_body("hello", R"("inputs":"x","stream":false)"));
    EXPECT_EQ(flow.status, 200u) << i << " " << flow.body;
  }
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(wait_for_live(0));
  EXPECT_EQ(metric("guestflow_guests_created_total"), 12);
  EXPECT_EQ(metric("guestflow_guests_deleted_total"), 12);
  EXPECT_TRUE(test_support::eventually([&] { return metric("guestflow_runs_inflight") == 0; },
                                       60s, 20ms));
}

TEST_F(serve_limits_test, a_component_caller_that_goes_away_cancels_the_run_and_its_guest) {
  const std::string body =
      "{\"flow_id\":\"f\",\"component_id\":\"c\",\"reuse\":\"none\","
      "\"timeout_seconds\":600,\"program\":\"import time\\ntime.sleep(300)\"}";
  auto caller = stream("POST", "/v1/components/run", body);
  ASSERT_TRUE(wait_for_live(1));
  caller->disconnect();
  EXPECT_TRUE(test_support::eventually([&] { return live_guests().empty(); }, 60s, 20ms));
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(test_support::eventually([&] { return metric("guestflow_runs_inflight") == 0; },
                                       60s, 20ms)); // its slot is free again
}

TEST_F(serve_limits_test, a_sandbox_run_past_serves_limit_is_answered_and_its_guest_deleted) {
  start_serve({{"GUESTFLOW_RUN_LIMIT_SECONDS", "8"}});
  auto t0 = std::chrono::steady_clock::now();
  auto reply = call("POST", "/v1/sandbox/run", sleeper_body());
  EXPECT_EQ(reply.status, 503u) << reply.body;
  EXPECT_TRUE(contains(reply.body, R"("code":"transient")")) << reply.body;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 40s); // the limit, not the 300 s sleep
  // Nobody waits for the run any more: it is cancelled, its guest deleted, its slot free.
  EXPECT_TRUE(test_support::eventually([&] { return live_guests().empty(); }, 60s, 20ms));
  EXPECT_TRUE(wait_until_no_guest_is_owed());
  EXPECT_TRUE(test_support::eventually([&] { return metric("guestflow_runs_inflight") == 0; },
                                       60s, 20ms));
}

TEST_F(serve_limits_test, a_reusable_run_past_serves_limit_frees_its_flows_guest_for_the_next) {
  start_serve({{"GUESTFLOW_RUN_LIMIT_SECONDS", "8"}});
  auto component = [](const std::string& program) {
    return "{\"flow_id\":\"f\",\"component_id\":\"c\",\"reuse\":\"flow\","
           "\"timeout_seconds\":600,\"program\":\"" +
           program + "\"}";
  };
  auto slow = call("POST", "/v1/components/run", component("import time\\ntime.sleep(300)"));
  EXPECT_EQ(slow.status, 503u) << slow.body;
  EXPECT_TRUE(contains(slow.body, R"("code":"transient")")) << slow.body;
  // The abandoned run holds the flow's guest no more: the next run gets it (kept, reused)
  // within the limit and finds none of its processes left there (it prints every command
  // line but its own and its parent's).
  auto next = call("POST", "/v1/components/run",
                   component("import os\\nme = {os.getpid(), os.getppid()}\\n"
                             "for p in os.listdir('/proc'):\\n"
                             "    if p.isdigit() and int(p) not in me:\\n"
                             "        print(open('/proc/' + p + '/cmdline').read())"));
  EXPECT_EQ(next.status, 200u) << next.body;
  // The guest's init: the control plane's static init, run from the descriptor it is sealed in.
  EXPECT_TRUE(contains(next.body, "/proc/self/fd/")) << next.body;
  EXPECT_FALSE(contains(next.body, "python")) << next.body;
  EXPECT_TRUE(test_support::eventually([&] { return metric("guestflow_runs_inflight") == 0; },
                                       60s, 20ms));
  EXPECT_EQ(live_guests().size(), 1u); // the flow's guest, kept
}

TEST_F(serve_limits_test, a_sandbox_body_over_its_cap_is_refused_before_it_is_read) {
  // The default server: /v1/sandbox/run takes 1 MiB; a 60 MB body is answered from its head.
  int fd = connect_raw();
  send_all(fd, "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth() +
                   "Content-Type: application/json\r\nContent-Length: 60000000\r\n\r\n" +
                   std::string(64 * 1024, 'x'));
  auto head = answer_head(fd);
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 413 ")) << head.substr(0, 200);
  auto rest = read_until(fd, [](const std::string& s) { return contains(s, "}"); });
  EXPECT_TRUE(contains(head + rest, "1048576")) << head + rest;
  ::close(fd);
}

TEST_F(serve_limits_test, a_chunked_body_is_refused_as_soon_as_it_passes_the_cap) {
  int fd = connect_raw();
  send_all(fd, "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth() +
                   "Transfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = "10000\r\n" + std::string(0x10000, 'x') + "\r\n"; // 64 KiB
  size_t sent = 0;
  std::string head;
  // Keep sending until the answer comes; the server must answer near 1 MiB, not read on.
  while (sent < (size_t{32} << 20)) {
    send_all(fd, chunk);
    sent += 0x10000;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 0) == 1) {
      head = answer_head(fd);
      break;
    }
  }
  EXPECT_TRUE(starts_with(head, "HTTP/1.1 413 ")) << "sent " << sent << ": " << head;
  // What the kernel buffers on both sides comes on top of the cap; far from 32 MiB.
  EXPECT_LT(sent, size_t{8} << 20);
  ::close(fd);
  EXPECT_EQ(call("GET", "/healthz").status, 200u);
}

TEST_F(serve_limits_test, every_endpoint_has_its_cap_and_bodiless_ones_take_none) {
  // GET and DELETE take no body.
  int fd = connect_raw();
  send_all(fd, "GET /v1/capabilities HTTP/1.1\r\nHost: x\r\n" + auth() +
                   "Content-Length: 10\r\n\r\n0123456789");
  EXPECT_TRUE(starts_with(answer_head(fd), "HTTP/1.1 413 "));
  ::close(fd);
  // A component's program is capped as a sandbox's code (1 MiB) …
  std::string big = R"({"flow_id":"f","component_id":"c","program":")" +
                    std::string(1 << 20, 'x') + R"j("})j";
  auto component = call("POST", "/v1/components/run", big);
  EXPECT_EQ(component.status, 413u) << component.body.substr(0, 200);
  EXPECT_TRUE(contains(component.body, "POST /v1/components/run")) << component.body;
  // … and a flow by GUESTFLOW_MAX_BODY_BYTES.
  start_serve({{"GUESTFLOW_MAX_BODY_BYTES", "65536"}});
  auto flow = call("POST", "/v1/runs",
                   run_body("hello", R"("inputs":")" + std::string(70'000, 'x') + "\""));
  EXPECT_EQ(flow.status, 413u) << flow.body.substr(0, 200);
  EXPECT_TRUE(contains(flow.body, "GUESTFLOW_MAX_BODY_BYTES")) << flow.body;
  EXPECT_EQ(metric("guestflow_guests_created_total"), 0);
}

TEST_F(serve_limits_test, malformed_http_is_answered_before_the_close) {
  struct row {
    const char* what;
    std::string bytes;
    const char* status;
  };
  std::vector<row> rows{
      {"garbage request line", "NOT HTTP AT ALL\r\n\r\n", "HTTP/1.1 400 "},
      {"bad version", "GET /healthz HTTP/9.x\r\nHost: x\r\n\r\n", "HTTP/1.1 400 "},
      {"bad Content-Length", "POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
       "HTTP/1.1 400 "},
      {"header over 16 KiB",
       "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20'000, 'a') + "\r\n\r\n",
       "HTTP/1.1 431 "},
      {"bad chunk",
       "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth() +
           "Transfer-Encoding: chunked\r\n\r\nZZ\r\nxx\r\n",
       "HTTP/1.1 400 "},
      // The fixture's client timeout is 2 s: a request that stopped half-way gets 408.
      {"stalled header", "GET /healthz HTTP/1.1\r\nHost: x\r\n", "HTTP/1.1 408 "},
      {"stalled body",
       "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth() + "Content-Length: 100\r\n\r\n{",
       "HTTP/1.1 408 "},
  };
  for (auto& r : rows) {
    int fd = connect_raw();
    send_all(fd, r.bytes);
    auto head = answer_head(fd);
    EXPECT_TRUE(starts_with(head, r.status)) << r.what << ": '" << head.substr(0, 80) << "'";
    EXPECT_TRUE(contains(head, "Connection: close")) << r.what;
    EXPECT_TRUE(closed_by_server(fd)) << r.what;
    ::close(fd);
  }
  // A connection that never sent a byte owes nobody an answer: it is only closed.
  int idle = connect_raw();
  EXPECT_EQ(read_until(idle, [](const std::string&) { return false; }), "");
  ::close(idle);
  EXPECT_EQ(call("GET", "/healthz").status, 200u);
}
