// Service URLs through `serve` (bridge/API.md, "Service URLs"): a session's port reached
// through the URL serve signs — HTTP, a server-sent stream line by line, a WebSocket — and
// the tokens it refuses; the same with serve reaching its control plane over https (a wrong
// certificate refused). A real serve, a real local control plane, real guests.

#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/integration/bridge/tls_front.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/raw_connection.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <utility> // before the Asio headers (see CONTRIBUTING)

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;
using test_support::eventually;

class ports : public bridge_fixture {
protected:
  void SetUp() override {
    runtime_fixture::SetUp();
    start_serve({{"GUESTFLOW_PORT_URL_TTL_SECONDS", "600"}});
  }

  /// A field of a flat JSON answer ("" when absent).
  static std::string field(const std::string& body, const std::string& name) {
    auto k = body.find("\"" + name + "\":\"");
    if (k == std::string::npos) return {};
    k += name.size() + 4;
    return body.substr(k, body.find('"', k) - k);
  }

  /// An active session whose guest runs `python3 -m http.server 8000` over a directory
  /// with hello.txt and the test server (guest/port_server.py) on 8001.
  std::string session_with_servers() {
    auto r = call("POST", "/v1/sessions", R"({"user_id":"alice","thread_id":"ports"})");
    EXPECT_EQ(r.status, 200u) << r.body;
    auto id = field(r.body, "session_id");
    std::ifstream in{std::string{GUESTFLOW_SOURCE_DIR} +
                     "/tests/integration/bridge/guest/port_server.py"};
    std::stringstream program;
    program << in.rdbuf();
    auto put = [&](const std::string& path, const std::string& body) {
      auto w = call("PUT", "/v1/sessions/" + id + "/files/write?path=" + path, body);
      EXPECT_EQ(w.status, 200u) << w.body;
    };
    put("/workspace/site/hello.txt", "hello from the guest\n");
    put("/workspace/port_server.py", program.str());
    // Both in the background, in their own sessions: the command returns at once.
    auto c = call(
        "POST", "/v1/sessions/" + id + "/commands",
        R"x({"command":"cd /workspace/site && )x"
        R"x((setsid python3 -m http.server 8000 >/workspace/http.log 2>&1 &) && )x"
        R"x((setsid python3 /workspace/port_server.py 8001 >/workspace/ps.log 2>&1 &)"})x");
    EXPECT_EQ(c.status, 200u) << c.body;
    return id;
  }

  /// POST …/ports/{port}: the answer.
  http_reply expose(const std::string& id, const std::string& port,
                    const std::string& body = {}) const {
    return call("POST", "/v1/sessions/" + id + "/ports/" + port, body);
  }

  /// The path of a URL on this serve ("/v1/ports/TOKEN/"), checked to be this serve's.
  std::string path_of(const std::string& url) const {
    auto base = "http://127.0.0.1:" + std::to_string(serve->port());
    EXPECT_EQ(url.compare(0, base.size(), base), 0) << url;
    return url.substr(base.size());
  }

  /// GET through a service URL, without serve's bearer token (the URL carries its own).
  http_reply get(const std::string& path) const { return call("GET", path, {}, false); }

  /// Polls the URL until the guest's server answers (it starts in the background).
  bool answers(const std::string& path) const {
    return eventually([&] { return get(path).status == 200; }, 30s, 50ms);
  }

  /// The test server's /sse (10 lines, 0.3 s apart) read through `path`: each line as it
  /// was sent, not held back.
  void expect_sse_line_by_line(const std::string& path) const {
    http_stream s{client(), "GET", path + "sse", {}};
    ASSERT_EQ(s.status(), 200u);
    EXPECT_EQ(s.headers().at("content-type"), "text/event-stream");
    std::vector<std::chrono::steady_clock::time_point> at;
    while (auto line = s.next_line(30s))
      if (line->rfind("data: ", 0) == 0) {
        EXPECT_EQ(*line, "data: " + std::to_string(at.size()));
        at.push_back(std::chrono::steady_clock::now());
      }
    ASSERT_EQ(at.size(), 10u);
    // The guest writes them 0.3 s apart: held back and sent at once, they would arrive
    // together.
    EXPECT_GT(at.back() - at.front(), 1500ms);
  }

  /// The test server's /ws echo through `path`: 1,000 messages round-trip.
  void expect_websocket_echo(const std::string& path) const {
    namespace net = boost::asio;
    namespace websocket = boost::beast::websocket;
    net::io_context io;
    websocket::stream<net::ip::tcp::socket> ws{io};
    ws.next_layer().connect({net::ip::make_address("127.0.0.1"), serve->port()});
    ws.handshake("127.0.0.1:" + std::to_string(serve->port()), path + "ws");
    ws.text(true);
    for (int i = 0; i < 1000; ++i) {
      auto msg =
          "message " + std::to_string(i) + std::string(static_cast<size_t>(i % 200), 'x');
      ws.write(net::buffer(msg));
      boost::beast::flat_buffer buf;
      ws.read(buf);
      ASSERT_EQ(boost::beast::buffers_to_string(buf.data()), msg);
    }
    ws.close(websocket::close_code::normal);
  }

  /// What the guest's servers logged (a failure's context).
  std::string logs(const std::string& id) const {
    return call("POST", "/v1/sessions/" + id + "/commands",
                R"({"command":"cat /workspace/http.log /workspace/ps.log; ps ax"})")
        .body;
  }
};

TEST_F(ports, http_server_in_the_guest_is_listed_through_the_url) {
  auto id = session_with_servers();
  auto r = expose(id, "8000");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_FALSE(field(r.body, "expires_at").empty()) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_EQ(path.compare(0, 10, "/v1/ports/"), 0) << path;
  ASSERT_TRUE(answers(path)) << get(path).status << " " << get(path).body << "\n" << logs(id);
  auto listing = get(path);
  EXPECT_NE(listing.body.find("hello.txt"), std::string::npos) << listing.body;
  auto file = get(path + "hello.txt");
  EXPECT_EQ(file.status, 200u);
  EXPECT_EQ(file.body, "hello from the guest\n");
  // A query travels with the path.
  EXPECT_EQ(get(path + "hello.txt?x=1").body, "hello from the guest\n");
}

TEST_F(ports, a_server_sent_stream_arrives_line_by_line) {
  auto id = session_with_servers();
  auto r = expose(id, "8001");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_TRUE(eventually([&] { return get(path + "nothing").status == 404; }, 30s, 50ms));
  expect_sse_line_by_line(path);
}

TEST_F(ports, a_websocket_echo_round_trips_a_thousand_messages) {
  auto id = session_with_servers();
  auto r = expose(id, "8001");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_TRUE(eventually([&] { return get(path + "nothing").status == 404; }, 30s, 50ms));
  expect_websocket_echo(path);
}

TEST_F(ports, wrong_expired_and_unscoped_tokens_are_refused) {
  auto id = session_with_servers();
  auto r = expose(id, "8000");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_TRUE(answers(path));
  auto token = path.substr(10, path.size() - 11); // GUEST.PORT.EXPIRY.MAC
  // Another MAC, another port or a later expiry under the same MAC: 401.
  auto last = token.back() == '0' ? '1' : '0';
  auto wrong_mac = token.substr(0, token.size() - 1) + last;
  auto dot = token.find('.');
  auto other_port = token.substr(0, dot) + ".8001" + token.substr(token.find('.', dot + 1));
  for (auto& t : {wrong_mac, other_port, std::string{"nonsense"}}) {
    auto refused = get("/v1/ports/" + t + "/");
    EXPECT_EQ(refused.status, 401u) << t << ": " << refused.body;
  }
  // A URL asked for one second is refused once it has expired.
  auto brief = expose(id, "8000", R"({"ttl_seconds":1})");
  ASSERT_EQ(brief.status, 200u) << brief.body;
  auto brief_path = path_of(field(brief.body, "url"));
  EXPECT_TRUE(eventually([&] { return get(brief_path).status == 401; }, 10s, 100ms));
  EXPECT_NE(get(brief_path).body.find("expired"), std::string::npos);
  // More than the server gives, port 0, an unknown session.
  EXPECT_EQ(expose(id, "8000", R"({"ttl_seconds":601})").status, 400u);
  EXPECT_EQ(expose(id, "0").status, 400u);
  EXPECT_EQ(expose("gf-s-nosuchsession", "8000").status, 404u);
  // Minting needs serve's token; using the URL does not (checked above).
  EXPECT_EQ(call("POST", "/v1/sessions/" + id + "/ports/8000", {}, false).status, 401u);
}

TEST_F(ports, a_closed_port_is_the_control_planes_502) {
  auto id = session_with_servers();
  auto r = expose(id, "8002");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto closed = get(path_of(field(r.body, "url")));
  EXPECT_EQ(closed.status, 502u) << closed.body;
  EXPECT_NE(closed.body.find("guest_port_closed"), std::string::npos) << closed.body;
}

TEST_F(ports, a_reusable_component_guest_serves_its_port_by_its_name) {
  // The run leaves http.server going in its kept guest, in a session of its own.
  auto run = call(
      "POST", "/v1/components/run",
      R"({"flow_id":"f-ports","component_id":"c1","reuse":"flow","program":)"
      R"("import subprocess\nopen('/workspace/hi.txt','w').write('kept\\n')\n)"
      R"(subprocess.Popen(['python3','-m','http.server','8000'],cwd='/workspace',)"
      R"(start_new_session=True,stdout=subprocess.DEVNULL,stderr=subprocess.DEVNULL)\n"})");
  ASSERT_EQ(run.status, 200u) << run.body;
  auto guest = field(run.body, "guest");
  ASSERT_EQ(guest.compare(0, 5, "gf-c-"), 0) << run.body;
  auto r = call("POST", "/v1/components/" + guest + "/ports/8000");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_TRUE(answers(path + "hi.txt"));
  EXPECT_EQ(get(path + "hi.txt").body, "kept\n");
  // Only a reusable guest's name, and one that exists.
  EXPECT_EQ(call("POST", "/v1/components/not-a-guest/ports/8000").status, 400u);
  EXPECT_EQ(call("POST", "/v1/components/gf-c-00000000000000000/ports/8000").status, 404u);
}

/// serve in front of two control planes: each URL reaches the node that holds its guest.
TEST_F(ports, on_a_fleet_each_url_reaches_the_node_that_holds_the_guest) {
  std::vector<std::unique_ptr<control_plane_process>> nodes;
  std::string urls;
  for (auto name : {"node-a", "node-b"}) {
    nodes.push_back(std::make_unique<control_plane_process>(
        dir.path() / name, std::vector<std::string>{"--node", name}));
    urls += (urls.empty() ? "" : ",") + std::string{"http://127.0.0.1:"} +
            std::to_string(nodes.back()->port());
  }
  start_serve({{"GUESTFLOW_CONTROL_PLANE_URL", urls}, {"GUESTFLOW_SESSION_REPLICAS", "8"}});
  auto holds = [&](size_t node, const std::string& name) {
    auto r = http_client{nodes[node]->port()}.call("GET", "/v1/sandboxes");
    return r.body.find("\"" + name + "\"") != std::string::npos;
  };
  // Sessions until each node holds one (placement is by committed memory, ties at random).
  std::string on[2];
  for (int i = 0; i < 8 && (on[0].empty() || on[1].empty()); ++i) {
    auto r = call("POST", "/v1/sessions",
                  R"({"user_id":"alice","thread_id":"fleet-)" + std::to_string(i) + "\"}");
    ASSERT_EQ(r.status, 200u) << r.body;
    auto id = field(r.body, "session_id");
    for (size_t n = 0; n < 2; ++n)
      if (on[n].empty() && holds(n, id)) on[n] = id;
  }
  ASSERT_FALSE(on[0].empty() || on[1].empty()) << "placement used one node only";
  for (auto& id : on) {
    auto w =
        call("PUT", "/v1/sessions/" + id + "/files/write?path=/workspace/site/who.txt", id);
    ASSERT_EQ(w.status, 200u) << w.body;
    auto c = call("POST", "/v1/sessions/" + id + "/commands",
                  R"x({"command":"cd /workspace/site && )x"
                  R"x((setsid python3 -m http.server 8000 >/dev/null 2>&1 &)"})x");
    ASSERT_EQ(c.status, 200u) << c.body;
  }
  for (auto& id : on) {
    auto r = expose(id, "8000");
    ASSERT_EQ(r.status, 200u) << r.body;
    auto path = path_of(field(r.body, "url"));
    ASSERT_TRUE(answers(path + "who.txt")) << id;
    EXPECT_EQ(get(path + "who.txt").body, id);
  }
  for (auto& id : on)
    call("DELETE", "/v1/sessions/" + id);
  serve.reset(); // before its nodes
}

/// serve in front of an https control plane (the real local control plane behind a
/// TLS-terminating front: it serves plain HTTP only), trusted through SSL_CERT_FILE as the
/// control-plane client trusts it: the same URLs work, forwarded over TLS.
class ports_over_tls : public ports {
protected:
  void SetUp() override {
    runtime_fixture::SetUp();
    front = std::make_unique<tls_front>(cp->port(), good);
    // Trusted: the front's certificate, and one for another name (refused by the host-name
    // check, not by the chain).
    auto trusted = file("trusted.pem", good.cert_pem + elsewhere.cert_pem);
    start_serve(
        {{"GUESTFLOW_CONTROL_PLANE_URL", "https://localhost:" + std::to_string(front->port())},
         {"SSL_CERT_FILE", trusted},
         {"GUESTFLOW_PORT_URL_TTL_SECONDS", "600"}});
  }

  void TearDown() override {
    front->present(good);
    serve.reset();
    ports::TearDown();
    front.reset();
  }

  test_cert good = make_test_cert("gf-front", "DNS:localhost,IP:127.0.0.1");
  test_cert elsewhere = make_test_cert("gf-elsewhere", "DNS:elsewhere.example");
  test_cert untrusted = make_test_cert("gf-untrusted", "DNS:localhost,IP:127.0.0.1");
  std::unique_ptr<tls_front> front;
};

TEST_F(ports_over_tls, http_sse_and_a_websocket_reach_the_guest_over_tls) {
  auto id = session_with_servers();
  auto listing = expose(id, "8000");
  ASSERT_EQ(listing.status, 200u) << listing.body;
  auto path = path_of(field(listing.body, "url"));
  ASSERT_TRUE(answers(path)) << get(path).status << " " << get(path).body << "\n" << logs(id);
  EXPECT_NE(get(path).body.find("hello.txt"), std::string::npos);
  auto before = front->relayed();
  EXPECT_EQ(get(path + "hello.txt").body, "hello from the guest\n");
  EXPECT_GT(front->relayed(), before); // it went through the front, over TLS
  auto r = expose(id, "8001");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto app = path_of(field(r.body, "url"));
  ASSERT_TRUE(eventually([&] { return get(app + "nothing").status == 404; }, 30s, 50ms));
  expect_sse_line_by_line(app);
  expect_websocket_echo(app);
  // Many requests, one after another, each on a client connection of its own: the TLS
  // connection each left open closes with it.
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(get(path + "hello.txt").body, "hello from the guest\n") << i;
  // Requests on one client connection: the later ones go over the TLS connection the first
  // left open (handed back after its exchange), no new connection at the front.
  test_support::raw_connection c{serve->port()};
  auto request = "GET " + path + "hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  auto at_first = front->relayed();
  for (int i = 0; i < 3; ++i) {
    c.send(request);
    auto answer = c.read_until("hello from the guest\n", 30s);
    EXPECT_EQ(answer.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << answer;
  }
  EXPECT_EQ(front->relayed(), at_first + 1);
}

TEST_F(ports_over_tls, a_wrong_certificate_is_refused_and_nothing_is_forwarded) {
  auto id = session_with_servers();
  auto r = expose(id, "8000");
  ASSERT_EQ(r.status, 200u) << r.body;
  auto path = path_of(field(r.body, "url"));
  ASSERT_TRUE(answers(path)) << logs(id);
  for (auto* cert : {&untrusted, &elsewhere}) {
    front->present(*cert);
    auto relayed = front->relayed();
    auto refused = front->refused();
    auto answer = get(path + "hello.txt");
    EXPECT_EQ(answer.status, 503u) << answer.body;
    EXPECT_NE(answer.body.find("unavailable"), std::string::npos) << answer.body;
    EXPECT_NE(answer.body.find("TLS handshake"), std::string::npos) << answer.body;
    EXPECT_EQ(front->relayed(), relayed); // no byte reached the control plane
    // The front sees its side of the failed handshake when serve's close reaches it, which
    // may be after serve answered.
    EXPECT_TRUE(test_support::eventually([&] { return front->refused() > refused; }, 10s, 5ms));
  }
  front->present(good);
  EXPECT_EQ(get(path + "hello.txt").body, "hello from the guest\n");
}

} // namespace
} // namespace guestflow::testing
