// A `unix://` control plane whose accept queue is full: the connection was refused for now
// and nothing was sent, so even a create (never retried blindly) is tried again inside its
// deadline — and fails transient, naming the busy server, if the queue never drains.
#include "messages/sandbox.hpp"
#include "tests/integration/client/client_fixture.hpp"
#include "tests/support/temp_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <string>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace gft;
using namespace guestflow;

namespace {

const std::string created_json =
    R"({"id":"sb-1","name":"n","ip":"10.0.0.2","shape":"s","rootfs":"r","vcpu":1,"mem_mib":256,)"
    R"("disk_mib":1,"spawn_ms":1,"egress":["*"]})";

/// Reads one request head (no body expected beyond what arrives with it) from `fd`.
std::string read_head(int fd) {
  std::string req;
  char buf[4096];
  while (req.find("\r\n\r\n") == std::string::npos) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    req.append(buf, static_cast<size_t>(n));
  }
  return req;
}

/// A keep-alive success answer around `data`.
void answer(int fd, const std::string& data) {
  auto body = R"({"status":"success","data":)" + data + "}";
  auto res = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
             std::to_string(body.size()) + "\r\n\r\n" + body;
  EXPECT_EQ(::write(fd, res.data(), res.size()), static_cast<ssize_t>(res.size()));
}

/// A Unix listener with a backlog of one that accepts nothing until told to: its accept
/// queue is filled by connections of its own.
class full_listener {
public:
  explicit full_listener(bool fill_now = true) {
    path_ = (dir_.path() / "cp.sock").string();
    fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    auto a = address();
    EXPECT_EQ(::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd_, 1), 0);
    if (fill_now) fill();
  }

  /// Connects until the kernel says the accept queue is full.
  void fill() {
    auto a = address();
    for (;;) {
      int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (::connect(c, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
        EXPECT_EQ(errno, EAGAIN);
        ::close(c);
        break;
      }
      fillers_.push_back(c);
    }
  }

  int listener() const { return fd_; }
  ~full_listener() {
    // A client that never came (a failed test) must not leave serve_once blocked in
    // accept: shutting the listener down wakes it.
    ::shutdown(fd_, SHUT_RDWR);
    if (server_.joinable()) server_.join();
    for (int c : fillers_)
      ::close(c);
    ::close(fd_);
    ::unlink(path_.c_str());
  }

  std::string url() const { return "unix://" + path_; }

  /// From now on: accept the fillers (closing them), then answer the first connection that
  /// sends a request with a success envelope around `data`.
  void serve_once(std::string data) {
    server_ = std::thread([this, data = std::move(data)] {
      for (size_t i = 0; i < fillers_.size(); ++i)
        ::close(::accept(fd_, nullptr, nullptr));
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return; // the listener was shut down: no request came
      requests_ = read_head(c).rfind("POST /v1/sandboxes HTTP/1.1\r\n", 0) == 0 ? 1 : -1;
      answer(c, data);
      ::close(c);
    });
  }

  int requests() const { return requests_; }

private:
  sockaddr_un address() const {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    return a;
  }

  test_support::temp_dir dir_{"gf-unix"}; ///< removed last, with the socket in it
  std::string path_;
  int fd_ = -1;
  std::vector<int> fillers_;
  std::thread server_;
  std::atomic<int> requests_{0};
};

sandbox_create_request some_create() {
  return sandbox_create_request{"s", {}, {}, {}, {}, {}, false};
}

/// Returns once every call made on `c` before it met the full queue at least once. The
/// client runs a lane's calls in order on the lane's one thread (io_threads = 1, the
/// default), and a call's first connect happens inside the handler that begins it; so a
/// probe call begun afterwards — refused by the same full queue, and ended by its 1 ms
/// deadline — answers only after the earlier calls were refused. No sleep, no guessing.
void wait_until_refused(guestflow::cp::client& c) {
  auto probe = expect<sandbox_view>();
  c.get("probe", 1ms, probe->cb());
  auto r = probe->get();
  ASSERT_FALSE(r) << "the queue was not full: the probe got an answer";
  EXPECT_EQ(r.error().code, ec::transient) << r.error().message;
}

} // namespace

TEST_F(cp_client, a_full_unix_accept_queue_is_busy_transient_after_retrying) {
  full_listener busy;
  auto c = make_client(at(busy.url()), fast_config());
  auto started = std::chrono::steady_clock::now();
  auto k = expect<sandbox_created>();
  c->create(some_create(), 300ms, k->cb());
  auto r = k->get();
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_NE(r.error().message.find("control plane at " + busy.url() + " is busy"),
            std::string::npos)
      << r.error().message;
  EXPECT_GE(took, 250ms); // it kept trying until the deadline
  c->shutdown();
}

TEST_F(cp_client, a_create_refused_by_a_full_unix_queue_is_sent_once_it_drains) {
  full_listener busy;
  auto c = make_client(at(busy.url()), fast_config());
  auto k = expect<sandbox_created>();
  c->create(some_create(), 5s, k->cb());
  wait_until_refused(*c); // the create was refused once: its retry is what gets it in
  busy.serve_once(created_json);
  auto r = k->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "sb-1");
  c->shutdown();
  EXPECT_EQ(busy.requests(), 1);
}

TEST_F(cp_client, a_call_waiting_on_a_full_unix_queue_gets_the_next_released_connection) {
  full_listener busy{false};
  // Backoff of 1.5–3 s: a waiting call that had to retry on its own would be that late.
  auto cfg = fast_config();
  cfg.retry_initial = 3s;
  cfg.retry_max = 3s;
  auto c = make_client(at(busy.url()), cfg);
  // Call A gets in while there is room, and its answer is held back.
  auto a = expect<sandbox_view>();
  c->get("sb-1", 10s, a->cb());
  int conn = ::accept(busy.listener(), nullptr, nullptr);
  ASSERT_GE(conn, 0);
  EXPECT_EQ(read_head(conn).rfind("GET /v1/sandboxes/sb-1 HTTP/1.1\r\n", 0), 0u);
  // Now the queue is full, and stays full: call B cannot open a connection of its own.
  busy.fill();
  auto b = expect<sandbox_created>();
  c->create(some_create(), 10s, b->cb());
  wait_until_refused(*c); // B met the full queue and waits (backoff 1.5–3 s)
  // A's answer frees its keep-alive connection: B's request must come on it at once, not
  // after B's own backoff.
  timeval within{1, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &within, sizeof within);
  answer(conn, view_json("sb-1", "running"));
  auto got_a = a->get();
  ASSERT_TRUE(got_a) << got_a.error().message;
  EXPECT_EQ(read_head(conn).rfind("POST /v1/sandboxes HTTP/1.1\r\n", 0), 0u)
      << "B's request did not come on A's released connection within a second";
  answer(conn, created_json);
  auto got_b = b->get();
  ASSERT_TRUE(got_b) << got_b.error().message;
  EXPECT_EQ(got_b->id, "sb-1");
  c->shutdown();
  ::close(conn);
}
