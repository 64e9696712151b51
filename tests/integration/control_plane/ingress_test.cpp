// Service URLs (issue 40) with real guests: `python3 -m http.server` in a deny-all guest
// listed through its URL, a server-sent stream arriving line by line, a WebSocket echo of
// 1,000 messages, the token (header, ?token= → cookie, wrong → 401), the typed failures
// (closed port 502, paused 409, unknown and without ingress 404, body over the cap 413,
// past the per-guest connection cap 429, idle connections closed), a stopped guest woken,
// and isolation: the URL never reaches a port of the host or of another guest. Proxied
// requests count as the guest's use for auto-pause, in flight and between them.
#include "tests/integration/control_plane/fixture.hpp"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <sys/socket.h>
#include <thread>

namespace guestflow::testing {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = beast::websocket;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

/// The guest-side app (standard library only): GET /sse sends `data: N` five times, 0.3 s
/// apart; GET /slow… answers after 1.5 s (keep-alive); POST /echo answers the body and the
/// header names it received; POST /early answers before reading the body; POST /lines
/// echoes each line of the body as a chunk as soon as it came; GET /apart sends its header,
/// then its small body 0.3 s later; GET /cut sends a header promising 10 bytes and closes;
/// GET /ws is a WebSocket echo (RFC 6455 text and binary frames, close answered).
const std::string guest_app = R"py(
import base64, hashlib, http.server, socketserver, struct, sys, time

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/sse":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            for i in range(5):
                self.wfile.write(b"data: %d\n\n" % i); self.wfile.flush()
                time.sleep(0.3)
            self.close_connection = True
            return
        if self.path == "/ws":
            return self.websocket()
        if self.path in ("/apart", "/cut"):
            self.send_response(200); self.send_header("Content-Length", "10"); self.end_headers()
            self.wfile.flush()
            if self.path == "/cut":
                self.close_connection = True
                return
            time.sleep(0.3)
            self.wfile.write(b"apart-body"); self.wfile.flush()
            return
        if self.path.startswith("/slow"):
            time.sleep(1.5)
        body = ("get " + self.path).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        if self.path == "/early":
            self.send_response(200); self.send_header("Content-Length", "5"); self.end_headers()
            self.wfile.write(b"early"); self.wfile.flush()
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.close_connection = True
            return
        if self.path == "/lines":
            n = int(self.headers.get("Content-Length", "0"))
            self.send_response(200); self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            got = 0
            while got < n:
                line = self.rfile.readline(n - got)
                if not line: break
                got += len(line)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line)); self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n"); self.wfile.flush()
            return
        n = int(self.headers.get("Content-Length", "0"))
        data = self.rfile.read(n)
        names = ",".join(sorted(k.lower() for k in self.headers.keys())).encode()
        cookie = (self.headers.get("Cookie") or "").encode()
        body = data + b"|" + names + b"|" + cookie
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def websocket(self):
        key = self.headers["Sec-WebSocket-Key"]
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket"); self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept); self.end_headers(); self.wfile.flush()
        r, w = self.rfile, self.wfile
        while True:
            head = r.read(2)
            if len(head) < 2: return
            op, n = head[0] & 15, head[1] & 127
            if n == 126: n = struct.unpack(">H", r.read(2))[0]
            elif n == 127: n = struct.unpack(">Q", r.read(8))[0]
            mask = r.read(4)
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
            if op == 8:
                w.write(b"\x88\x00"); w.flush(); return
            if op in (1, 2):
                n = len(data)
                hdr = bytes([0x80 | op, n]) if n < 126 else bytes([0x80 | op, 126]) + struct.pack(">H", n)
                w.write(hdr + data); w.flush()
        self.close_connection = True

class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

S(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
)py";

const std::string key = "k-ingress-test";

class control_plane_ingress : public control_plane_test {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    api_key_ = key;
    start({"--api-key", key, "--max-file-bytes", "65536", "--max-ingress-connections", "3",
           "--idle-timeout-seconds", "3", "--ingress-domain", "apps.test"});
  }

  /// A deny-all guest with service URLs; its secret.
  sandbox_created ingress_guest(const std::string& extra = {}) {
    auto g =
        create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"ingress_enabled":true)" +
               extra + "}");
    EXPECT_EQ(g.ingress_secret.size(), 43u) << "32 bytes, base64url without padding";
    return g;
  }

  /// Starts `cmd` in the background in the guest (its own session: exec returns at once).
  void spawn(const std::string& id, const std::string& cmd) {
    auto r = exec(id, "/bin/sh",
                  {"-c", "setsid sh -c '" + cmd + "' >/tmp/app.log 2>&1 < /dev/null &"});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  /// Starts the guest app on `port` and waits (deadline) until its URL answers.
  void start_app(const sandbox_created& g, uint16_t port) {
    ASSERT_EQ(put_file(g.id, "/workspace/app.py", guest_app).status, 200u);
    spawn(g.id, "python3 /workspace/app.py " + std::to_string(port));
    wait_listening(g, port);
  }

  void wait_listening(const sandbox_created& g, uint16_t port) {
    unsigned last = 0;
    ASSERT_TRUE(eventually(
        [&] {
          last = get(g, port, "/").status;
          return last != 502;
        },
        20s, 50ms))
        << "the guest's port " << port << " never listened (last status " << last << ")";
  }

  static std::string url(const sandbox_created& g, uint16_t port, const std::string& path) {
    return "/v1/sandboxes/" + g.id + "/ports/" + std::to_string(port) + path;
  }

  /// A request through the URL with the guest's token (not the API key).
  http_reply get(const sandbox_created& g, uint16_t port, const std::string& path,
                 const std::string& method = "GET", const std::string& body = {},
                 header_map headers = {}) {
    headers.emplace("X-Guestflow-Ingress-Token", g.ingress_secret);
    return http_client{cp_->port()}.call(method, url(g, port, path), body, headers);
  }
};

/// A WebSocket through the control plane, every operation under a deadline.
class ws_client {
public:
  ws_client(uint16_t cp_port, const std::string& target, const std::string& token)
      : ws_(io_) {
    ws_.next_layer().connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), cp_port});
    ws_.set_option(websocket::stream_base::decorator([token](websocket::request_type& req) {
      req.set("X-Guestflow-Ingress-Token", token);
    }));
    bool done = false;
    beast::error_code err;
    ws_.async_handshake("127.0.0.1", target, [&](beast::error_code ec) {
      err = ec;
      done = true;
    });
    run(done, 10s);
    if (err) throw std::runtime_error("handshake: " + err.message());
  }

  std::string echo(const std::string& text) {
    bool done = false;
    beast::error_code err;
    ws_.async_write(net::buffer(text), [&](beast::error_code ec, size_t) {
      err = ec;
      done = true;
    });
    run(done, 10s);
    if (err) throw std::runtime_error("write: " + err.message());
    return read(10s);
  }

  /// The next message; throws when the connection ends or `deadline` passes.
  std::string read(std::chrono::milliseconds deadline) {
    beast::flat_buffer buf;
    bool done = false;
    beast::error_code err;
    ws_.async_read(buf, [&](beast::error_code ec, size_t) {
      err = ec;
      done = true;
    });
    run(done, deadline);
    if (err) throw std::runtime_error("read: " + err.message());
    return beast::buffers_to_string(buf.data());
  }

private:
  void run(bool& done, std::chrono::milliseconds deadline) {
    io_.restart();
    io_.run_for(deadline);
    if (!done) {
      ws_.next_layer().close();
      io_.restart();
      io_.run_for(1s);
      throw std::runtime_error("websocket operation timed out");
    }
  }

  net::io_context io_;
  websocket::stream<tcp::socket> ws_;
};

/// One keep-alive HTTP/1.1 connection to the control plane on a blocking socket, each read
/// under a deadline (SO_RCVTIMEO): what a browser's kept connection does, request after
/// request (the second and later ride the upstream connection the first one left).
class kept_connection {
public:
  explicit kept_connection(uint16_t port)
      : sock_(io_) {
    sock_.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), port});
    timeval tv{10, 0};
    ::setsockopt(sock_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  void send(const std::string& bytes) { net::write(sock_, net::buffer(bytes)); }
  /// One response with a Content-Length body: its status line's code and its body.
  std::pair<unsigned, std::string> response() {
    for (;;) {
      auto end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        auto head = buf_.substr(0, end);
        std::transform(head.begin(), head.end(), head.begin(), ::tolower);
        auto cl = head.find("content-length:");
        size_t len = cl == std::string::npos ? 0 : std::stoul(head.substr(cl + 15));
        if (buf_.size() >= end + 4 + len) {
          unsigned status = static_cast<unsigned>(std::stoul(buf_.substr(9, 3)));
          auto body = buf_.substr(end + 4, len);
          buf_.erase(0, end + 4 + len);
          return {status, body};
        }
      }
      char chunk[4096];
      beast::error_code ec;
      auto n = sock_.read_some(net::buffer(chunk), ec);
      if (ec) throw std::runtime_error("response: " + ec.message());
      buf_.append(chunk, n);
    }
  }
  /// Reads until `text` came (what came so far, consumed); throws past the read deadline.
  std::string wait_for(const std::string& text) {
    for (;;) {
      if (auto at = buf_.find(text); at != std::string::npos) {
        auto upto = buf_.substr(0, at + text.size());
        buf_.erase(0, at + text.size());
        return upto;
      }
      char chunk[4096];
      beast::error_code ec;
      auto n = sock_.read_some(net::buffer(chunk), ec);
      if (ec) throw std::runtime_error("waiting for '" + text + "': " + ec.message());
      buf_.append(chunk, n);
    }
  }
  /// What one read brings (after anything already buffered); throws past the read deadline.
  std::string read_once() {
    if (!buf_.empty()) return std::exchange(buf_, {});
    char chunk[4096];
    beast::error_code ec;
    auto n = sock_.read_some(net::buffer(chunk), ec);
    if (ec) throw std::runtime_error("read: " + ec.message());
    return std::string(chunk, n);
  }
  /// True when the server closes the connection within the read deadline (bytes before
  /// the end are skipped; sends of the caller may have failed meanwhile).
  bool closed_by_server() {
    for (;;) {
      char chunk[4096];
      beast::error_code ec;
      sock_.read_some(net::buffer(chunk), ec);
      if (ec == net::error::eof || ec == net::error::connection_reset) return true;
      if (ec) return false; // the deadline
    }
  }
  std::pair<unsigned, std::string> get(const std::string& target, const std::string& token) {
    send("GET " + target + " HTTP/1.1\r\nHost: t\r\nX-Guestflow-Ingress-Token: " + token +
         "\r\n\r\n");
    return response();
  }

private:
  net::io_context io_;
  tcp::socket sock_;
  std::string buf_;
};

TEST_F(control_plane_ingress, http_server_of_a_deny_all_guest_is_listed_through_its_url) {
  auto g = ingress_guest();
  ASSERT_EQ(put_file(g.id, "/workspace/site/hello.txt", "hello from the guest\n").status, 200u);
  spawn(g.id, "cd /workspace/site && exec python3 -m http.server 8000 --bind 127.0.0.1");
  wait_listening(g, 8000);
  auto listing = get(g, 8000, "/");
  EXPECT_EQ(listing.status, 200u);
  EXPECT_NE(listing.body.find("hello.txt"), std::string::npos) << listing.body;
  auto file = get(g, 8000, "/hello.txt");
  EXPECT_EQ(file.status, 200u);
  EXPECT_EQ(file.body, "hello from the guest\n");
  // The API key opens it too; the Host form (--ingress-domain) reaches the same port at /.
  EXPECT_EQ(call("GET", url(g, 8000, "/hello.txt")).body, "hello from the guest\n");
  auto by_host =
      http_client{cp_->port()}.call("GET", "/hello.txt", {},
                                    {{"Host", "8000-" + g.id + ".apps.test"},
                                     {"X-Guestflow-Ingress-Token", g.ingress_secret}});
  EXPECT_EQ(by_host.status, 200u);
  EXPECT_EQ(by_host.body, "hello from the guest\n");
  // The port without its slash: redirected to it, so relative links resolve below it.
  auto bare = get(g, 8000, "");
  EXPECT_EQ(bare.status, 303u);
  EXPECT_EQ(bare.headers["location"], url(g, 8000, "/"));
  // The secret is the create answer's alone.
  auto listed = call("GET", "/v1/sandboxes");
  EXPECT_EQ(listed.body.find(g.ingress_secret), std::string::npos);
  EXPECT_EQ(call("GET", "/v1/sandboxes/" + g.id).body.find(g.ingress_secret),
            std::string::npos);
}

TEST_F(control_plane_ingress, tokens_are_checked_and_never_reach_the_guest) {
  auto g = ingress_guest();
  start_app(g, 8080);
  http_client anonymous{cp_->port()};
  auto none = anonymous.call("GET", url(g, 8080, "/x"));
  expect_refusal(none, 401, "ingress token");
  auto wrong = anonymous.call("GET", url(g, 8080, "/x"), {},
                              {{"X-Guestflow-Ingress-Token", std::string(43, 'A')}});
  expect_refusal(wrong, 401, "wrong ingress token");
  // Another guest's secret opens only that guest.
  auto other = ingress_guest();
  expect_refusal(anonymous.call("GET", url(g, 8080, "/x"), {},
                                {{"X-Guestflow-Ingress-Token", other.ingress_secret}}),
                 401, "wrong ingress token");

  // ?token= once: a redirect without it that sets the cookie, which then opens the URL.
  auto once = anonymous.call("GET", url(g, 8080, "/page?token=" + g.ingress_secret + "&a=1"));
  EXPECT_EQ(once.status, 303u);
  EXPECT_EQ(once.headers["location"], url(g, 8080, "/page?a=1"));
  auto cookie = once.headers["set-cookie"];
  EXPECT_NE(cookie.find("guestflow_ingress=" + g.ingress_secret), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("HttpOnly"), std::string::npos) << cookie;
  EXPECT_NE(cookie.find("Path=" + url(g, 8080, "")), std::string::npos) << cookie;
  auto with_cookie =
      anonymous.call("GET", url(g, 8080, "/page?a=1"), {},
                     {{"Cookie", "theme=dark; guestflow_ingress=" + g.ingress_secret}});
  EXPECT_EQ(with_cookie.status, 200u);
  EXPECT_EQ(with_cookie.body, "get /page?a=1");
  EXPECT_EQ(anonymous.call("GET", url(g, 8080, "/page?token=wrong")).status, 401u);

  // What the guest receives: the body, and none of the credentials (API key, token header,
  // Authorization, the token cookie); other cookies pass.
  auto echoed = http_client{cp_->port()}.call(
      "POST", url(g, 8080, "/echo"), "payload",
      {{"X-Guestflow-Ingress-Token", g.ingress_secret},
       {"Authorization", "Bearer t"},
       {"X-Api-Key", key},
       {"Cookie", "theme=dark; guestflow_ingress=" + g.ingress_secret},
       {"X-App", "1"}});
  ASSERT_EQ(echoed.status, 200u) << echoed.body;
  EXPECT_EQ(echoed.body.substr(0, 8), "payload|");
  EXPECT_NE(echoed.body.find("x-app"), std::string::npos) << echoed.body;
  for (const char* gone : {"authorization", "x-api-key", "x-guestflow-ingress-token",
                           "guestflow_ingress", "keep-alive"})
    EXPECT_EQ(echoed.body.find(gone), std::string::npos) << gone << " reached: " << echoed.body;
  EXPECT_NE(echoed.body.find("theme=dark"), std::string::npos) << echoed.body;
}

TEST_F(control_plane_ingress, a_server_sent_stream_arrives_line_by_line) {
  auto g = ingress_guest();
  start_app(g, 8081);
  http_stream sse{http_client{cp_->port()},
                  "GET",
                  url(g, 8081, "/sse"),
                  {},
                  {{"X-Guestflow-Ingress-Token", g.ingress_secret}}};
  ASSERT_EQ(sse.status(), 200u);
  EXPECT_EQ(sse.headers().at("content-type"), "text/event-stream");
  std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>> lines;
  while (auto line = sse.next_line(10s))
    if (!line->empty()) lines.emplace_back(*line, std::chrono::steady_clock::now());
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i].first, "data: " + std::to_string(i));
  // The guest waits 0.3 s between events (1.2 s first to last): a proxy that buffered the
  // response would hand them over together.
  EXPECT_GE(lines.back().second - lines.front().second, 900ms)
      << "the first event did not arrive before the last was sent";
}

TEST_F(control_plane_ingress, a_websocket_echo_round_trips_1000_messages) {
  auto g = ingress_guest();
  start_app(g, 8082);
  {
    ws_client ws{cp_->port(), url(g, 8082, "/ws"), g.ingress_secret};
    for (int i = 0; i < 1000; ++i) {
      auto text =
          "message " + std::to_string(i) + std::string(static_cast<size_t>(i % 300), 'x');
      ASSERT_EQ(ws.echo(text), text) << "message " << i;
    }
  }
  // Connections per guest are capped (3 here): three tunnels held, the fourth is 429.
  std::vector<std::unique_ptr<ws_client>> held;
  for (int i = 0; i < 3; ++i) {
    std::unique_ptr<ws_client> w;
    // A tunnel just closed is released once its exchange saw both sides end.
    ASSERT_TRUE(eventually([&] {
      try {
        w = std::make_unique<ws_client>(cp_->port(), url(g, 8082, "/ws"), g.ingress_secret);
        return true;
      } catch (const std::exception&) {
        return false;
      }
    }));
    held.push_back(std::move(w));
  }
  expect_refusal(get(g, 8082, "/x"), 429, "service-URL connections");
  // Idle tunnels are closed after the client timeout (3 s here), freeing their places.
  EXPECT_THROW(held.front()->read(15s), std::runtime_error);
  held.clear();
  EXPECT_TRUE(eventually([&] { return get(g, 8082, "/x").status == 200; }));
}

TEST_F(control_plane_ingress, a_request_body_streams_up_while_the_response_streams_down) {
  auto g = ingress_guest();
  start_app(g, 8088);
  const std::string head_of =
      "HTTP/1.1\r\nHost: t\r\nX-Guestflow-Ingress-Token: " + g.ingress_secret +
      "\r\nContent-Length: ";
  // Each line of the body comes back before the next is sent: a proxy that held the body
  // whole (or read no response before the body ended) would wait here forever.
  {
    kept_connection c{cp_->port()};
    const int lines = 5;
    const std::string line = "line n of the upload\n";
    c.send("POST " + url(g, 8088, "/lines") + " " + head_of +
           std::to_string(lines * line.size()) + "\r\n\r\n");
    for (int i = 0; i < lines; ++i) {
      auto mine = line;
      mine[5] = static_cast<char>('0' + i);
      c.send(mine);
      EXPECT_NO_THROW(c.wait_for(mine)) << "line " << i << " did not come back before the next";
    }
    EXPECT_NO_THROW(c.wait_for("0\r\n\r\n")) << "the chunked answer did not end";
  }
  // An answer before the body ended reaches the client at once, says the connection closes,
  // and the connection is then closed (drained first: not reset under the answer).
  {
    kept_connection c{cp_->port()};
    c.send("POST " + url(g, 8088, "/early") + " " + head_of + "60000\r\n\r\n" +
           std::string(1000, 'u'));
    std::string head;
    ASSERT_NO_THROW(head = c.wait_for("early")) << "the early answer was held for the body";
    std::transform(head.begin(), head.end(), head.begin(), ::tolower);
    EXPECT_NE(head.find("connection: close"), std::string::npos) << head;
    EXPECT_EQ(head.substr(0, 12), "http/1.1 200");
    try {
      c.send(std::string(59000, 'u'));
    } catch (const std::exception&) {
    }
    EXPECT_TRUE(c.closed_by_server());
  }
  // The guest is served on as before.
  EXPECT_EQ(get(g, 8088, "/after").body, "get /after");
}

// A small answer the app sends in two writes (its header, then its body) reaches the client
// in one: the client is woken once, not for a header it cannot use yet. An app that cuts its
// answer after the header gets the client a 502, not a truncated answer.
TEST_F(control_plane_ingress, a_small_answer_sent_in_two_writes_reaches_the_client_whole) {
  auto g = ingress_guest();
  start_app(g, 8089);
  kept_connection c{cp_->port()};
  c.send("GET " + url(g, 8089, "/apart") +
         " HTTP/1.1\r\nHost: t\r\nX-Guestflow-Ingress-Token: " + g.ingress_secret + "\r\n\r\n");
  auto first = c.read_once();
  EXPECT_EQ(first.substr(0, 12), "HTTP/1.1 200") << first;
  EXPECT_NE(first.find("\r\n\r\napart-body"), std::string::npos)
      << "the header came without its body: " << first;
  // The connection carries the next request.
  EXPECT_EQ(c.get(url(g, 8089, "/next"), g.ingress_secret).second, "get /next");
  auto cut = get(g, 8089, "/cut");
  expect_refusal(cut, 502, "closed the connection");
  EXPECT_NE(cut.body.find(R"("code":"guest_port_closed")"), std::string::npos) << cut.body;
}

TEST_F(control_plane_ingress, typed_failures) {
  auto g = ingress_guest();
  // Nothing listens: 502 guest_port_closed.
  auto closed = get(g, 9, "/");
  expect_refusal(closed, 502, "nothing listens on port 9");
  EXPECT_NE(closed.body.find(R"("code":"guest_port_closed")"), std::string::npos);
  start_app(g, 8083);
  // A body over the cap (--max-file-bytes 65536): 413; one under it passes.
  expect_refusal(get(g, 8083, "/echo", "POST", std::string(70'000, 'b')), 413, "exceeds");
  EXPECT_EQ(get(g, 8083, "/echo", "POST", std::string(60'000, 'b')).status, 200u);
  // Paused: 409; resumed: served again.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/pause").status, 200u);
  expect_refusal(get(g, 8083, "/x"), 409, "paused");
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/resume").status, 200u);
  EXPECT_EQ(get(g, 8083, "/x").status, 200u);
  // Unknown, without ingress_enabled, deleted: 404 (with the API key, so not a 401).
  expect_refusal(call("GET", "/v1/sandboxes/sb-0000000000000000/ports/80/"), 404, "no sandbox");
  auto plain = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_TRUE(plain.ingress_secret.empty());
  expect_refusal(call("GET", url(plain, 80, "/")), 404, "ingress_enabled");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  expect_refusal(call("GET", url(g, 8083, "/x")), 404, "no sandbox");
  expect_refusal(call("GET", "/v1/sandboxes/" + plain.id + "/ports/70000/"), 400, "port");
}

TEST_F(control_plane_ingress, a_stopped_persistent_guest_wakes_on_a_request) {
  auto g = ingress_guest(R"(,"persistent":true,"idle_ttl_seconds":0)");
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  ASSERT_EQ(view(g.id).status, sandbox_status::stopped);
  // Nothing listens in the started guest yet (its processes went with the stop): 502, and
  // the guest runs again.
  expect_refusal(get(g, 8084, "/"), 502, "guest_port_closed");
  EXPECT_EQ(view(g.id).status, sandbox_status::running);
  start_app(g, 8084);
  EXPECT_EQ(get(g, 8084, "/woken").body, "get /woken");
  // A wrong token wakes nothing.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  EXPECT_EQ(http_client{cp_->port()}
                .call("GET", url(g, 8084, "/"), {}, {{"X-Guestflow-Ingress-Token", "nope"}})
                .status,
            401u);
  EXPECT_EQ(view(g.id).status, sandbox_status::stopped);
}

TEST_F(control_plane_ingress, the_url_never_reaches_a_host_port_or_another_guests_port) {
  // A listener on the host's loopback: the guest-port URL for its port must not reach it.
  net::io_context io;
  tcp::acceptor host{io, tcp::endpoint{net::ip::make_address("127.0.0.1"), 0}};
  host.non_blocking(true);
  auto host_port = host.local_endpoint().port();
  auto g = ingress_guest();
  auto r = get(g, host_port, "/");
  expect_refusal(r, 502, "guest_port_closed");
  tcp::socket accepted{io};
  beast::error_code ec;
  host.accept(accepted, ec);
  EXPECT_EQ(ec, net::error::would_block) << "a proxied connection reached the host's port";

  // Another guest's server (deny-all or allow-all, own netns): not reachable through g.
  auto other = ingress_guest();
  start_app(other, 8085);
  EXPECT_EQ(get(other, 8085, "/x").status, 200u);
  expect_refusal(get(g, 8085, "/x"), 502, "guest_port_closed");
  auto networked = create(R"({"shape":"s-1vcpu-256mb","egress":["*"],"ingress_enabled":true})");
  ASSERT_FALSE(networked.ip.empty());
  start_app(networked, 8086);
  EXPECT_EQ(get(networked, 8086, "/x").status, 200u);
  expect_refusal(get(g, 8086, "/x"), 502, "guest_port_closed");
  expect_refusal(get(other, 8086, "/x"), 502, "guest_port_closed");
}

} // namespace
} // namespace guestflow::testing

namespace guestflow::testing {
namespace {

/// Auto-pause scaled down (60 s → 0.6 s) for the idle accounting of proxied requests.
class control_plane_ingress_idle : public control_plane_ingress {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    api_key_ = key;
    start({"--api-key", key, "--auto-pause-scale", "0.01"});
  }
};

TEST_F(control_plane_ingress_idle, proxied_requests_count_as_use_for_auto_pause) {
  auto g = ingress_guest(R"(,"auto_pause_after_seconds":60)");
  start_app(g, 8087);
  kept_connection c{cp_->port()};
  ASSERT_EQ(c.get(url(g, 8087, "/first"), g.ingress_secret).first, 200u);
  // Requests on the kept connection, each well within the 0.6 s idle time of the last:
  // the guest stays running though no exec or file call comes.
  auto until = std::chrono::steady_clock::now() + 2s;
  while (std::chrono::steady_clock::now() < until) {
    auto r = c.get(url(g, 8087, "/tick"), g.ingress_secret);
    ASSERT_EQ(r.first, 200u) << r.second;
    ASSERT_EQ(view(g.id).status, sandbox_status::running) << "paused between requests";
    std::this_thread::sleep_for(150ms); // the client's pace, not a synchronisation
  }
  // A request in flight longer than the idle time (the app answers after 1.5 s) keeps it
  // running too: busy from the request's start to its end.
  c.send("GET " + url(g, 8087, "/slow") +
         " HTTP/1.1\r\nHost: t\r\nX-Guestflow-Ingress-Token: " + g.ingress_secret + "\r\n\r\n");
  EXPECT_FALSE(eventually([&] { return view(g.id).status != sandbox_status::running; }, 1200ms))
      << "paused while a proxied request was in flight";
  auto slow = c.response();
  EXPECT_EQ(slow.first, 200u);
  EXPECT_EQ(slow.second, "get /slow");
  // Idle after it: paused within the scaled idle time (plus a sweep).
  EXPECT_TRUE(eventually([&] { return view(g.id).status == sandbox_status::paused; }, 10s));
}

} // namespace
} // namespace guestflow::testing
