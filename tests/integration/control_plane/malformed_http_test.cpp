// Malformed HTTP on raw loopback sockets: the control plane answers 400 (bad request line,
// header or chunk), 408 (a header or body that stops arriving) or 431 (headers too large)
// before it closes, and closes an idle connection without a word.
#include "tests/integration/control_plane/fixture.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

/// A raw TCP connection to 127.0.0.1:port.
class raw_connection {
public:
  explicit raw_connection(uint16_t port)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      throw std::runtime_error("connect failed");
  }
  ~raw_connection() { ::close(fd_); }
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;

  void send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      auto n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("send failed");
      off += static_cast<size_t>(n);
    }
  }

  /// Everything the server sends until it closes (or `deadline` passes: then "TIMEOUT"
  /// is appended, which no expectation below accepts).
  std::string read_to_close(std::chrono::milliseconds deadline = 60s) {
    std::string got;
    auto until = std::chrono::steady_clock::now() + deadline;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return got + "TIMEOUT";
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return got; // EOF (or a reset after the reply)
      got.append(buf, static_cast<size_t>(n));
    }
  }

private:
  int fd_;
};

class control_plane_malformed_http : public control_plane_test {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    start({"--idle-timeout-seconds", "1"});
  }

  /// Sends `bytes` on a new connection and returns all it gets back before the close.
  std::string exchange(const std::string& bytes) {
    raw_connection c{cp_->port()};
    c.send(bytes);
    return c.read_to_close();
  }

  static void expect_answer(const std::string& reply, const std::string& status_line,
                            const std::string& needle) {
    EXPECT_EQ(reply.rfind(status_line + "\r\n", 0), 0u) << reply;
    EXPECT_NE(reply.find("Connection: close"), std::string::npos) << reply;
    EXPECT_NE(reply.find(R"({"status":"fail","data":{"message":)"), std::string::npos) << reply;
    EXPECT_NE(reply.find(needle), std::string::npos)
        << "expected '" << needle << "' in " << reply;
  }
};

TEST_F(control_plane_malformed_http, a_bad_request_line_is_400) {
  expect_answer(exchange("GARBAGE\r\n\r\n"), "HTTP/1.1 400 Bad Request", "malformed");
  expect_answer(exchange("GET /v1/shapes HTTP/9\r\n\r\n"), "HTTP/1.1 400 Bad Request",
                "malformed");
}

TEST_F(control_plane_malformed_http, a_bad_header_field_is_400) {
  expect_answer(exchange("GET /v1/shapes HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"),
                "HTTP/1.1 400 Bad Request", "malformed HTTP request header");
  expect_answer(
      exchange("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: nine\r\n\r\n"),
      "HTTP/1.1 400 Bad Request", "malformed");
}

TEST_F(control_plane_malformed_http, a_bad_chunk_is_400) {
  expect_answer(exchange("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                         "chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n"),
                "HTTP/1.1 400 Bad Request", "malformed HTTP request body");
  EXPECT_EQ(sandbox_total(), 0u);
}

TEST_F(control_plane_malformed_http, headers_too_large_are_431) {
  std::string big =
      "GET /v1/shapes HTTP/1.1\r\nHost: x\r\nX-Filler: " + std::string(20 * 1024, 'a') +
      "\r\n\r\n";
  expect_answer(exchange(big), "HTTP/1.1 431 Request Header Fields Too Large",
                "request header fields too large");
}

TEST_F(control_plane_malformed_http, a_header_that_stops_arriving_is_408) {
  raw_connection c{cp_->port()};
  c.send("GET /v1/shapes HTTP/1.1\r\nHost: x\r\n"); // and never the blank line
  expect_answer(c.read_to_close(), "HTTP/1.1 408 Request Timeout",
                "the request header did not arrive within 1 s");
}

TEST_F(control_plane_malformed_http, a_body_that_stops_arriving_is_408) {
  raw_connection c{cp_->port()};
  c.send("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
         "Content-Length: 100\r\n\r\n{\"shape\":");
  expect_answer(c.read_to_close(), "HTTP/1.1 408 Request Timeout",
                "the request body did not arrive within 1 s");
  EXPECT_EQ(sandbox_total(), 0u);
}

TEST_F(control_plane_malformed_http, an_idle_connection_closes_without_an_answer) {
  raw_connection c{cp_->port()};
  EXPECT_EQ(c.read_to_close(), "") << "nothing was asked: nothing to answer";
}

TEST_F(control_plane_malformed_http, well_formed_requests_still_work_after_the_refusals) {
  expect_answer(exchange("GARBAGE\r\n\r\n"), "HTTP/1.1 400 Bad Request", "malformed");
  auto reply = exchange("GET /v1/shapes HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
}

} // namespace
} // namespace guestflow::testing
