// Network isolation seen through the API: deny-all guests reach nothing, not even the
// host's loopback; link-local (the metadata service range) is blocked for every guest.
#include "tests/integration/control_plane/fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using control_plane_isolation = control_plane_test;

/// A TCP listener on 127.0.0.1:0 that counts the connections it could accept.
class loopback_listener {
public:
  loopback_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~loopback_listener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  /// Connects from the host (the test process), then returns accepted().
  int connect_and_count() {
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    int rc = ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::close(c);
    return rc == 0 ? accepted() : -1;
  }
  int accepted() {
    int n = 0;
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0; ++n)
      ::close(c);
    return n;
  }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

/// Python run in the guest: tries each HOST:PORT, prints "HOST:PORT open|blocked".
std::string probe(const std::vector<std::string>& targets) {
  std::string list;
  for (const auto& t : targets)
    list += (list.empty() ? "" : ",") + std::string{"'"} + t + "'";
  return "import socket\n"
         "for t in [" +
         list +
         "]:\n"
         "    h, p = t.rsplit(':', 1)\n"
         "    try:\n"
         "        socket.create_connection((h, int(p)), timeout=2).close(); print(t, 'open')\n"
         "    except OSError as e:\n"
         "        print(t, 'blocked')\n";
}

TEST_F(control_plane_isolation, deny_all_guest_cannot_reach_a_host_loopback_server) {
  loopback_listener server;
  auto host = "127.0.0.1:" + std::to_string(server.port());
  // The listener is reachable from the host itself, so "blocked" below means isolation.
  ASSERT_EQ(server.connect_and_count(), 1);
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(to_strings(g.egress), (std::vector<std::string>{"240.0.0.0/4"}));
  auto r = exec(g.id, "/usr/bin/python3", {"-c", probe({host, "10.0.2.2:80", "192.0.2.1:80"})});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, host + " blocked\n10.0.2.2:80 blocked\n192.0.2.1:80 blocked\n");
  EXPECT_EQ(server.accepted(), 0) << "the guest reached the host's loopback";
  // The guest sees only its own loopback interface.
  auto ifs = exec(g.id, "/bin/cat", {"/proc/net/dev"});
  EXPECT_EQ(ifs.stdout_text.find("eth"), std::string::npos) << ifs.stdout_text;
  EXPECT_EQ(ifs.stdout_text.find("veth"), std::string::npos) << ifs.stdout_text;
}

TEST_F(control_plane_isolation, link_local_metadata_range_is_blocked) {
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  ASSERT_TRUE(caps.link_local_blocked);
  std::vector<std::string> bodies = {R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})"};
  if (caps.supports_address_egress_rules) {
    bodies.push_back(R"({"shape":"s-1vcpu-256mb"})"); // allow all
    bodies.push_back(R"({"shape":"s-1vcpu-256mb","egress":["10.0.0.0/8:443"]})");
  }
  loopback_listener server;
  for (const auto& body : bodies) {
    auto g = create(body);
    auto r = exec(
        g.id, "/usr/bin/python3",
        {"-c", probe({"169.254.169.254:80", "127.0.0.1:" + std::to_string(server.port())})});
    EXPECT_EQ(r.stdout_text.find("169.254.169.254:80 blocked"), 0u)
        << body << ": " << r.stdout_text << r.stderr_text;
  }
  EXPECT_EQ(server.accepted(), 0) << "a guest reached the host's loopback";
}

} // namespace
} // namespace guestflow::testing

namespace guestflow::testing {
namespace {

TEST_F(control_plane_isolation, without_nftables_rules_are_refused_not_run_open) {
  stop();
  start({"--nft-path", "/nonexistent/nft"});
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_FALSE(caps.supports_address_egress_rules);
  auto before = sandbox_total();
  for (const std::string body :
       {R"({"shape":"s-1vcpu-256mb"})", R"({"shape":"s-1vcpu-256mb","egress":["*"]})",
        R"({"shape":"s-1vcpu-256mb","egress":["10.0.0.0/8:443"]})"})
    expect_refusal(call("POST", "/v1/sandboxes", body), 503, "nftables");
  EXPECT_EQ(sandbox_total(), before);
  EXPECT_EQ(workspace_count(), 0u);
  // No network at all needs no rules: still served.
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(exec(g.id, "/bin/echo", {"offline"}).stdout_text, "offline\n");
  expect_refusal(call("PUT", "/v1/sandboxes/" + g.id + "/egress", R"({"egress":["*"]})"), 503,
                 "nftables");
}

} // namespace
} // namespace guestflow::testing
