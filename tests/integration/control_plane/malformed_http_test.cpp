// Malformed HTTP on raw loopback sockets: the control plane answers 400 (bad request line,
// header or chunk), 408 (a header or body that stops arriving) or 431 (headers too large)
// before it closes, and closes an idle connection without a word.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/raw_connection.hpp"

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

using test_support::raw_connection;

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

/// Occurrences of `needle` in `text`.
size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

// RFC 9112 6.1/6.3: a request whose body cannot be framed the one way every reader agrees
// on is refused and the connection closed; Beast alone framed `xchunked` by its
// Content-Length, and one without a length as bodiless (its body the next request).
TEST_F(control_plane_malformed_http, an_unknown_transfer_coding_is_refused_not_framed) {
  std::string body = R"({"shape":"no-such-shape"})";
  auto with_length = exchange("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
                              "Transfer-Encoding: xchunked\r\nContent-Length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(with_length.rfind("HTTP/1.1 501 Not Implemented\r\n", 0), 0u) << with_length;
  EXPECT_NE(with_length.find("Connection: close"), std::string::npos) << with_length;
  EXPECT_NE(with_length.find("transfer coding 'xchunked' is not implemented"),
            std::string::npos)
      << with_length;
  EXPECT_EQ(with_length.find("no-such-shape"), std::string::npos) << "the body was read";

  // Without a length, what follows the head is not a second request.
  auto smuggled = exchange("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n"
                           "Transfer-Encoding: gzip, chunked\r\n\r\n"
                           "GET /v1/shapes HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(smuggled.rfind("HTTP/1.1 501 Not Implemented\r\n", 0), 0u) << smuggled;
  EXPECT_EQ(count(smuggled, "HTTP/1.1 "), 1u) << smuggled;
  EXPECT_EQ(sandbox_total(), 0u);
}

TEST_F(control_plane_malformed_http, faulty_chunked_framing_is_400) {
  for (std::string fields : {"Transfer-Encoding: chunked, chunked\r\n",
                             "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
                             "Transfer-Encoding: ,\r\n"}) {
    auto reply = exchange("POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\n" + fields +
                          "\r\n0\r\n\r\nGET /v1/shapes HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_answer(reply, "HTTP/1.1 400 Bad Request", "malformed HTTP request");
    EXPECT_EQ(count(reply, "HTTP/1.1 "), 1u) << fields << reply;
  }
  auto old = exchange("POST /v1/sandboxes HTTP/1.0\r\nHost: x\r\n"
                      "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
  EXPECT_EQ(old.rfind("HTTP/1.0 400 Bad Request\r\n", 0), 0u) << old;
  EXPECT_NE(old.find("HTTP/1.0 request"), std::string::npos) << old;
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
