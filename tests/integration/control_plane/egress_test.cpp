// "Unrestricted" (allow_network, egress ["*"]) means the internet: an allow-all guest does
// not reach RFC 1918, CGNAT or the host's own networks; a create that names such an address
// in its egress reaches it. Nothing here touches the real host's network: the test process
// moves into a network namespace of its own first (the control plane it starts, and so its
// guests, live there), and the "LAN" is a second namespace behind a veth, holding private
// addresses and one stand-in for the internet (198.51.100.9, TEST-NET-2), reached by the
// test namespace's default route. Both guest kinds: a gVisor guest's runsc runs inside the
// same guest netns, so the same rules outside it apply.
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/network/netns_egress.hpp"
#include "tests/integration/control_plane/fixture.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace guestflow::testing {
namespace {

constexpr const char* ip_tool = "/usr/sbin/ip";

/// Runs ip's batch `script` in the namespace `netns_fd` (-1: this thread's).
void ip_batch(const std::string& script, int netns_fd = -1) {
  local::command_options opt;
  opt.input = script;
  opt.netns_fd = netns_fd;
  auto out = local::run_command({ip_tool, "-b", "-"}, opt);
  ASSERT_TRUE(out) << out.error().message;
  ASSERT_EQ(out->exit_code, 0) << script << out->output;
}

/// Addresses inside the LAN namespace: the host's LAN neighbours (10.77.0.0/24 and, not
/// private, 203.0.113.0/24: the test namespace's own networks), private ranges, CGNAT.
const std::vector<std::string> private_addresses = {"10.77.0.2",  "203.0.113.2", "10.9.9.9",
                                                    "172.16.9.9", "192.168.9.9", "100.64.9.9"};
constexpr const char* internet_address = "198.51.100.9";

class control_plane_egress : public both_kinds_test {
protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access(ip_tool, X_OK) != 0 ||
        ::access("/usr/sbin/nft", X_OK) != 0)
      GTEST_SKIP() << "needs root, ip and nft";
    // This thread (which starts the control plane) and its children: a fresh "host".
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0) << std::strerror(errno);
    std::thread lan([this] {
      if (::unshare(CLONE_NEWNET) != 0) return;
      lan_fd_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
      listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    });
    lan.join();
    ASSERT_GE(lan_fd_, 0);
    std::string script = "link set lo up\nlink add eth0 type veth peer name up0 netns " +
                         std::to_string(::getpid()) + "\naddr add 10.77.0.2/24 dev eth0\n";
    for (auto& a : private_addresses)
      if (a != "10.77.0.2") script += "addr add " + a + "/32 dev eth0\n";
    script += std::string{"addr add "} + internet_address +
              "/32 dev eth0\nlink set eth0 up\nroute add default via 10.77.0.1\n";
    ip_batch(script, lan_fd_);
    ip_batch("link set lo up\naddr add 10.77.0.1/24 dev up0\naddr add 203.0.113.1/24 dev up0\n"
             "link set up0 up\n"
             "route add default via 10.77.0.2\n");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(::listen(listener_, 64), 0);
    socklen_t len = sizeof a;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    both_kinds_test::SetUp();
  }

  void TearDown() override {
    control_plane_test::TearDown();
    if (listener_ >= 0) ::close(listener_);
    if (lan_fd_ >= 0) ::close(lan_fd_); // the LAN namespace (and its veth) goes with it
  }

  /// The destination addresses of the connections the LAN accepted since the last call.
  std::vector<std::string> reached() {
    std::vector<std::string> out;
    for (int c; (c = ::accept(listener_, nullptr, nullptr)) >= 0;) {
      sockaddr_in a{};
      socklen_t len = sizeof a;
      ::getsockname(c, reinterpret_cast<sockaddr*>(&a), &len);
      char buf[INET_ADDRSTRLEN];
      out.push_back(::inet_ntop(AF_INET, &a.sin_addr, buf, sizeof buf));
      ::close(c);
    }
    return out;
  }

  /// "ADDRESS open|blocked" for each address at the LAN listener's port, from the guest.
  std::string probe(const std::string& id, const std::vector<std::string>& addresses) {
    std::string list;
    for (const auto& a : addresses)
      list += "'" + a + "',";
    auto r = exec(id, "/usr/bin/python3",
                  {"-c", "import socket\n"
                         "for h in [" +
                             list +
                             "]:\n"
                             "    try:\n"
                             "        socket.create_connection((h, " +
                             std::to_string(port_) +
                             "), timeout=3).close(); print(h, 'open')\n"
                             "    except OSError:\n"
                             "        print(h, 'blocked')\n"});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return r.stdout_text;
  }

  /// The guest's nftables table, read inside its network namespace.
  static std::string guest_rules(const std::string& id) {
    int ns = ::open(local::netns_path(local::netns_name(id)).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(ns, 0) << id;
    local::command_options opt;
    opt.netns_fd = ns;
    auto out = local::run_command({"/usr/sbin/nft", "list", "table", "inet", "guestflow"}, opt);
    ::close(ns);
    return out ? out->output : out.error().message;
  }

  int lan_fd_ = -1;
  int listener_ = -1;
  uint16_t port_ = 0;
};

TEST_P(control_plane_egress, an_allow_all_guest_reaches_the_internet_not_private_networks) {
  auto g = create(R"({"shape":"s-1vcpu-256mb"})");
  auto addresses = private_addresses;
  addresses.push_back(internet_address);
  std::string expected;
  for (auto& a : private_addresses)
    expected += a + " blocked\n";
  expected += std::string{internet_address} + " open\n";
  EXPECT_EQ(probe(g.id, addresses), expected);
  EXPECT_EQ(reached(), std::vector<std::string>{internet_address});

  auto rules = guest_rules(g.id);
  // nft merges what overlaps (10.77.0.0/24 into 10.0.0.0/8, 224/4 and 240/4 into 224/3).
  for (auto range : {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                     "0.0.0.0/8", "224.0.0.0/3", "203.0.113.0/24"})
    EXPECT_NE(rules.find(range), std::string::npos) << range << " not in\n" << rules;
}

TEST_P(control_plane_egress, a_private_address_named_in_the_egress_is_reached) {
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["172.16.9.9","198.51.100.9"]})");
  EXPECT_EQ(probe(g.id, {"172.16.9.9", "198.51.100.9", "10.9.9.9", "192.168.9.9"}),
            "172.16.9.9 open\n198.51.100.9 open\n10.9.9.9 blocked\n192.168.9.9 blocked\n");
  auto got = reached();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"172.16.9.9", "198.51.100.9"}));
}

GUESTFLOW_BOTH_KINDS(control_plane_egress);

} // namespace
} // namespace guestflow::testing
