// Service URLs of gVisor guests (issues 40 and 42), with real runsc sandboxes: a gVisor
// guest's loopback is the Sentry's own, so the proxy's upstream is a relay started in the
// guest by `runsc exec` (control_plane_ingress.cpp). `python3 -m http.server` bound to
// 127.0.0.1 in a deny-all and a networked gVisor guest is listed through its URL, a closed
// port is 502 guest_port_closed, 4 MiB arrive whole, a kept client connection is answered
// request after request, a relay lives while its connection does and none is left after.
#include "tests/integration/control_plane/fixture.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <sys/socket.h>

namespace guestflow::testing {
namespace {

using control_plane_gvisor_ingress = control_plane_test;
namespace fs = std::filesystem;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

const std::string key = "k-gvisor-ingress-test";

class gvisor_ingress_fixture : public control_plane_gvisor_ingress {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    api_key_ = key;
    start({"--api-key", key});
    auto caps = call("GET", "/v1/capabilities");
    if (caps.body.find("\"gvisor\"") == std::string::npos)
      GTEST_SKIP() << "this control plane offers no gVisor guests: " << caps.body;
  }

  std::string url(const sandbox_created& g, uint16_t port, const std::string& path) const {
    return "/v1/sandboxes/" + g.id + "/ports/" + std::to_string(port) + path;
  }

  /// A request through the URL with the guest's token (not the API key).
  http_reply get(const sandbox_created& g, uint16_t port, const std::string& path) {
    return http_client{cp_->port()}.call("GET", url(g, port, path), {},
                                         {{"X-Guestflow-Ingress-Token", g.ingress_secret}});
  }

  /// `python3 -m http.server ARGS` on 127.0.0.1 in the guest's /workspace, in the background.
  void spawn_server(const sandbox_created& g, const std::string& args) {
    auto r = exec(g.id, "/bin/sh",
                  {"-c", "cd /workspace && setsid python3 -m http.server " + args +
                             " --bind 127.0.0.1 >/dev/null 2>&1 </dev/null &"});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  /// http.server (bound to 127.0.0.1) in a gVisor guest created with `egress` (a JSON
  /// member and its comma, or nothing) listed through its URL, a closed port 502, and no
  /// relay left afterwards.
  void check_listed_through_its_url(const std::string& egress) {
    auto g = create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor",)" + egress +
                    R"("ingress_enabled":true})");
    ASSERT_EQ(g.ingress_secret.size(), 43u);
    ASSERT_EQ(put_file(g.id, "/workspace/hello-from-gvisor.txt", "hi").status, 200u);
    spawn_server(g, "8000");

    // A closed port first: the relay finds nothing listening.
    auto closed = get(g, 8001, "/");
    EXPECT_EQ(closed.status, 502u) << closed.body;
    EXPECT_NE(closed.body.find("guest_port_closed"), std::string::npos) << closed.body;

    http_reply listed;
    ASSERT_TRUE(
        eventually([&] { return (listed = get(g, 8000, "/")).status != 502; }, 30s, 100ms))
        << "port 8000 never listened: " << listed.body;
    EXPECT_EQ(listed.status, 200u) << listed.body;
    EXPECT_NE(listed.body.find("hello-from-gvisor.txt"), std::string::npos) << listed.body;
    // A relay per request, each answered (one that read its stdio as blocking lost some).
    for (int i = 0; i < 10; ++i) {
      auto file = get(g, 8000, "/hello-from-gvisor.txt");
      EXPECT_EQ(file.status, 200u) << "request " << i << ": " << file.body;
      EXPECT_EQ(file.body, "hi");
    }
    // More than the sockets hold: the relay waits for the proxy to read (its stdio may be
    // non-blocking), nothing lost. Written in the guest: the files API caps uploads.
    ASSERT_EQ(exec(g.id, "python3",
                   {"-c", "open('/workspace/big.bin','wb').write(bytes(range(256))*16384)"})
                  .exit_code,
              0);
    auto big = get(g, 8000, "/big.bin");
    EXPECT_EQ(big.status, 200u);
    ASSERT_EQ(big.body.size(), 4u << 20);
    for (size_t i = 0; i < big.body.size(); i += 4099)
      ASSERT_EQ(uint8_t(big.body[i]), uint8_t(i % 256)) << "byte " << i;
    auto wrong = http_client{cp_->port()}.call("GET", url(g, 8000, "/"), {},
                                               {{"X-Guestflow-Ingress-Token", "nope"}});
    EXPECT_EQ(wrong.status, 401u) << wrong.body;

    // A kept client connection to an HTTP/1.1 server: each request gets a relay of its own
    // (the upstream is not kept), every answer arrives on the same client connection.
    spawn_server(g, "-p HTTP/1.1 8002");
    ASSERT_TRUE(eventually([&] { return get(g, 8002, "/").status == 200; }, 30s, 100ms));
    {
      net::io_context io;
      tcp::socket kept{io};
      kept.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), cp_->port()});
      timeval tv{20, 0};
      ::setsockopt(kept.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      std::string buf;
      for (int i = 0; i < 3; ++i) {
        net::write(kept, net::buffer("GET " + url(g, 8002, "/hello-from-gvisor.txt") +
                                     " HTTP/1.1\r\nHost: x\r\nX-Guestflow-Ingress-Token: " +
                                     g.ingress_secret + "\r\n\r\n"));
        size_t end;
        while ((end = buf.find("\r\n\r\n")) == std::string::npos || buf.size() < end + 4 + 2) {
          char chunk[4096];
          auto n = ::recv(kept.native_handle(), chunk, sizeof chunk, 0);
          ASSERT_GT(n, 0) << "request " << i << ": the connection ended after: " << buf;
          buf.append(chunk, size_t(n));
        }
        EXPECT_EQ(buf.substr(0, 12), "HTTP/1.1 200") << buf;
        EXPECT_EQ(buf.substr(end + 4, 2), "hi") << buf;
        buf.erase(0, end + 4 + 2);
      }
    }

    // A relay lives while its connection does: a request whose body has not come yet.
    std::string left;
    auto relays = [&] {
      auto ps = exec(g.id, "/bin/sh",
                     {"-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' <$p/cmdline; echo; done"});
      left = ps.stdout_text;
      EXPECT_EQ(ps.exit_code, 0) << ps.stderr_text;
      EXPECT_NE(left.find("http.server"), std::string::npos) << "the listing works: " << left;
      size_t n = 0;
      for (auto at = left.find("create_connection"); at != std::string::npos;
           at = left.find("create_connection", at + 1))
        ++n;
      return n;
    };
    {
      net::io_context io;
      tcp::socket held{io};
      held.connect(tcp::endpoint{net::ip::make_address("127.0.0.1"), cp_->port()});
      net::write(held, net::buffer("POST " + url(g, 8000, "/") +
                                   " HTTP/1.1\r\nHost: x\r\nX-Guestflow-Ingress-Token: " +
                                   g.ingress_secret + "\r\nContent-Length: 10\r\n\r\n"));
      EXPECT_TRUE(eventually([&] { return relays() == 1; }, 20s, 100ms)) << left;
    }
    // None left once its connection ended, and every runsc exec was reaped (reap removes
    // its process spec).
    const auto gdir = state_dir_ / "gvisor" / g.id;
    EXPECT_TRUE(eventually([&] { return relays() == 0; }, 10s, 100ms)) << left;
    size_t specs = 0;
    EXPECT_TRUE(eventually(
        [&] {
          specs = 0;
          for (const auto& e : fs::directory_iterator(gdir))
            if (e.path().filename().string().rfind("exec-", 0) == 0) ++specs;
          return specs == 0;
        },
        10s, 50ms))
        << specs << " exec files left in " << gdir;
  }
};

TEST_F(gvisor_ingress_fixture,
       http_server_of_a_deny_all_gvisor_guest_is_listed_through_its_url) {
  check_listed_through_its_url(R"("egress":["240.0.0.0/4"],)");
}

/// A networked gVisor guest: gVisor's own TCP/IP on its veth, its loopback still its own.
TEST_F(gvisor_ingress_fixture,
       http_server_of_a_networked_gvisor_guest_is_listed_through_its_url) {
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  if (!caps.supports_address_egress_rules) GTEST_SKIP() << "no egress rules on this host";
  check_listed_through_its_url(R"("egress":["10.0.0.0/8:443"],)");
}

} // namespace
} // namespace guestflow::testing
