// The transport's contract: auth, routing, body caps, malformed input, idle clients.

#include "tests/integration/bridge/bridge_fixture.hpp"

#include <poll.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class http_test : public bridge_fixture {};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

TEST_F(http_test, healthz_is_open_and_every_other_route_needs_the_bearer_token) {
  auto h = call("GET", "/healthz", {}, false);
  EXPECT_EQ(h.status, 200u);
  EXPECT_EQ(h.body, R"({"status":"ok"})");
  for (auto [method, target] : {std::pair{"GET", "/v1/capabilities"},
                                {"GET", "/metrics"},
                                {"POST", "/v1/runs"},
                                {"POST", "/v1/sandbox/run"},
                                {"DELETE", "/v1/runs/run-x"}}) {
    auto missing = call(method, target, "{}", false);
    EXPECT_EQ(missing.status, 401u) << target;
    EXPECT_EQ(missing.headers["www-authenticate"], "Bearer");
    EXPECT_TRUE(contains(missing.body, R"("code":"policy_refused")")) << missing.body;
    auto wrong = client().call(method, target, "{}", {{"Authorization", "Bearer nope"}});
    EXPECT_EQ(wrong.status, 401u) << target;
  }
  auto right = call("GET", "/v1/capabilities");
  EXPECT_EQ(right.status, 200u) << right.body;
}

TEST_F(http_test, capabilities_report_the_local_provider_honestly) {
  auto r = call("GET", "/v1/capabilities");
  ASSERT_EQ(r.status, 200u);
  EXPECT_TRUE(contains(r.body, R"("provider":"local")")) << r.body;
  EXPECT_TRUE(contains(r.body, R"("isolation":"namespaces")")) << r.body;
  EXPECT_TRUE(contains(r.body, R"("supports_domain_allowlist":false)")) << r.body;
}

TEST_F(http_test, unknown_routes_are_404_and_wrong_methods_405_with_allow) {
  auto r = call("GET", "/v2/nothing");
  EXPECT_EQ(r.status, 404u);
  EXPECT_TRUE(contains(r.body, R"("code":"not_found")")) << r.body;
  auto m = call("GET", "/v1/runs");
  EXPECT_EQ(m.status, 405u);
  EXPECT_EQ(m.headers["allow"], "POST");
  auto id = call("PUT", "/v1/runs/run-abc");
  EXPECT_EQ(id.status, 405u);
  EXPECT_EQ(id.headers["allow"], "DELETE");
}

TEST_F(http_test, malformed_bodies_are_400_naming_the_field_and_start_nothing) {
  struct row {
    const char* target;
    std::string body;
    const char* field;
  };
  std::vector<row> rows{
      {"/v1/runs", "{", "document"},
      {"/v1/runs", R"({"inputs":"x"})", "flow"},
      {"/v1/runs", R"({"flow":3})", "flow"},
      {"/v1/runs", run_body("hello", R"("timeout_seconds":0)"), "timeout_seconds"},
      {"/v1/runs", run_body("hello", R"("stream":"yes")"), "stream"},
      {"/v1/sandbox/run", R"({"code":5})", "code"},
      {"/v1/sandbox/run", R"({"code":"x","env":{"A=B":"c"}})", "env"},
      {"/v1/sandbox/run", R"({"code":"x","memory_mb":-1})", "memory_mb"},
      {"/v1/components/run", R"({"component_id":"c","program":"x"})", "flow_id"},
      {"/v1/components/run", R"({"flow_id":"f","component_id":"c"})", "program"},
      {"/v1/components/run",
       R"({"flow_id":"f","component_id":"c","program":"x","reuse":"all"})", "reuse"},
  };
  for (auto& r : rows) {
    auto reply = call("POST", r.target, r.body);
    EXPECT_EQ(reply.status, 400u) << r.target << " " << r.body.substr(0, 80);
    EXPECT_TRUE(contains(reply.body, R"("code":"bad_request")")) << reply.body;
    EXPECT_TRUE(contains(reply.body, r.field)) << r.field << " not in " << reply.body;
  }
  EXPECT_EQ(metric("guestflow_runs_accepted_total"), 0);
  EXPECT_EQ(metric("guestflow_guests_created_total"), 0);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(http_test, bodies_over_the_cap_are_413_before_they_are_read) {
  start_serve({{"GUESTFLOW_MAX_BODY_BYTES", "4096"}});
  std::string big = R"({"code":")" + std::string(8000, 'x') + R"("})";
  auto r = call("POST", "/v1/sandbox/run", big);
  EXPECT_EQ(r.status, 413u);
  EXPECT_TRUE(contains(r.body, "4096")) << r.body;
  // Without a length up front the cap binds while the body arrives.
  auto chunked =
      client().call("POST", "/v1/sandbox/run", big,
                    {{"Authorization", "Bearer " + token}, {"Transfer-Encoding", "chunked"}});
  EXPECT_EQ(chunked.status, 413u);
  auto small = call("POST", "/v1/sandbox/run", R"j({"code":"print(1)"})j");
  EXPECT_EQ(small.status, 200u) << small.body;
}

TEST_F(http_test, an_idle_or_slow_client_is_disconnected) {
  int fd = connect_raw();
  std::string partial = "POST /v1/runs HTTP/1.1\r\nHost: x\r\n"; // and then nothing
  ASSERT_EQ(::write(fd, partial.data(), partial.size()), static_cast<ssize_t>(partial.size()));
  // The server's client timeout is 2 s in this fixture: it answers 408 and closes (EOF)
  // well within 30 s.
  std::string got;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    ASSERT_EQ(::poll(&p, 1, 30'000), 1);
    char buf[512];
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(got.substr(0, 13), "HTTP/1.1 408 ") << got;
  ::close(fd);
  EXPECT_EQ(call("GET", "/healthz").status, 200u); // the server itself is fine
}

TEST_F(http_test, plain_answers_keep_the_connection_alive_but_an_early_refusal_closes_it) {
  int fd = connect_raw();
  auto send = [&](const std::string& request) {
    ASSERT_EQ(::write(fd, request.data(), request.size()),
              static_cast<ssize_t>(request.size()));
  };
  // Reads one answer; its status line.
  auto answer = [&]() -> std::string {
    std::string got;
    char buf[4096];
    for (;;) {
      auto head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        auto cl = got.find("Content-Length: ");
        auto len = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
        if (got.size() >= head_end + 4 + len) return got.substr(0, got.find("\r\n"));
      }
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 30'000) != 1) return "timeout";
      auto n = ::read(fd, buf, sizeof buf);
      if (n <= 0) return "closed";
      got.append(buf, static_cast<size_t>(n));
    }
  };
  auto auth = "Authorization: Bearer " + token + "\r\n";
  std::string bad = R"({"code":5})";
  send("POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\n" + auth +
       "Content-Length: " + std::to_string(bad.size()) + "\r\n\r\n" + bad);
  EXPECT_EQ(answer(), "HTTP/1.1 400 Bad Request");
  send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); // the same connection, after a body
  EXPECT_EQ(answer(), "HTTP/1.1 200 OK");
  send("POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n"); // no token
  EXPECT_EQ(answer(), "HTTP/1.1 401 Unauthorized");
  EXPECT_EQ(answer(), "closed"); // its body was never read: the connection ends
  ::close(fd);
}

// RFC 9112 6.1/6.3: a body that cannot be framed the one way every reader agrees on is
// refused and the connection closed (Beast alone framed `xchunked` by its Content-Length).
TEST_F(http_test, an_unknown_transfer_coding_is_refused_not_framed) {
  auto exchange = [&](const std::string& request) {
    int fd = connect_raw();
    EXPECT_EQ(::write(fd, request.data(), request.size()),
              static_cast<ssize_t>(request.size()));
    std::string got;
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 30'000) != 1) {
        got += "TIMEOUT";
        break;
      }
      char buf[4096];
      auto n = ::read(fd, buf, sizeof buf);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  };
  auto answers = [](const std::string& text) {
    size_t n = 0;
    for (auto at = text.find("HTTP/1.1 "); at != std::string::npos;
         at = text.find("HTTP/1.1 ", at + 1))
      ++n;
    return n;
  };
  auto head =
      "POST /v1/sandbox/run HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + token + "\r\n";
  std::string body = R"({"code":5})"; // framed by its length, a 400 naming `code`
  auto with_length = exchange(head + "Transfer-Encoding: xchunked\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(with_length.substr(0, 13), "HTTP/1.1 501 ") << with_length;
  EXPECT_TRUE(contains(with_length, "Connection: close")) << with_length;
  EXPECT_TRUE(contains(with_length, "transfer coding 'xchunked' is not implemented"))
      << with_length;
  auto smuggled =
      exchange(head + "Transfer-Encoding: gzip, chunked\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(smuggled.substr(0, 13), "HTTP/1.1 501 ") << smuggled;
  EXPECT_EQ(answers(smuggled), 1u) << smuggled;
  auto twice = exchange(head + "Transfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"
                               "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_EQ(twice.substr(0, 13), "HTTP/1.1 400 ") << twice;
  EXPECT_EQ(answers(twice), 1u) << twice;
  EXPECT_EQ(call("GET", "/healthz").status, 200u);
}

TEST_F(http_test, a_non_loopback_address_without_a_token_is_refused_at_start) {
  auto r = control_plane_process::run_to_exit({"serve", "--listen", "0.0.0.0:0"},
                                              env({{"GUESTFLOW_TOKEN", ""}}));
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.stderr_text, "non-loopback")) << r.stderr_text;
}
