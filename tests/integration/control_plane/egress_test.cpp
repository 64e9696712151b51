// "Unrestricted" (allow_network, egress ["*"]) means the internet: an allow-all guest does
// not reach RFC 1918, CGNAT or the host's own networks; a create that names such an address
// in its egress reaches it. Nothing here touches the real host's network: the test process
// moves into a network namespace of its own first (the control plane it starts, and so its
// guests, live there), and the "LAN" is a second namespace behind a veth, holding private
// addresses and one stand-in for the internet (198.51.100.9, TEST-NET-2), reached by the
// test namespace's default route. Both guest kinds: a gVisor guest's netstack sends on the
// same guest netns's veth, and its rules also hold on the veth's host side (which netstack's
// packets do pass), also after its stop kept its memory and its start restored it.
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
#include <sstream>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

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

  /// Runs in the guest, with `imports`: `try_each` for each address `h` (PORT: the LAN
  /// listener's port); returns what it printed.
  std::string for_each_address(const std::string& id, const std::vector<std::string>& addresses,
                               const std::string& imports, const std::string& try_each) {
    std::string list;
    for (const auto& a : addresses)
      list += "'" + a + "',";
    auto r = exec(id, "/usr/bin/python3",
                  {"-c", "import " + imports + "\nPORT = " + std::to_string(port_) +
                             "\nfor h in [" + list + "]:\n" + try_each});
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return r.stdout_text;
  }

  /// "ADDRESS open|blocked" for each address at the LAN listener's port, from the guest.
  std::string probe(const std::string& id, const std::vector<std::string>& addresses) {
    return for_each_address(id, addresses, "socket",
                            "    try:\n"
                            "        socket.create_connection((h, PORT), timeout=3).close(); "
                            "print(h, 'open')\n"
                            "    except OSError:\n"
                            "        print(h, 'blocked')\n");
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

  /// "ADDRESS open|refused|timeout" at the LAN listener's port: refused is a reset or an ICMP
  /// refusal (the rules' answer, at once), timeout a silent drop. An open connection is
  /// closed by a reset (SO_LINGER 0): nothing lingers in TIME_WAIT, which this runsc cannot
  /// checkpoint.
  std::string refusals(const std::string& id, const std::vector<std::string>& addresses) {
    return for_each_address(
        id, addresses, "errno, socket, struct",
        "    try:\n        s = socket.create_connection((h, PORT), timeout=5)\n"
        "        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n"
        "        s.close(); print(h, 'open')\n"
        "    except socket.timeout:\n        print(h, 'timeout')\n"
        "    except OSError as e:\n"
        "        print(h, 'refused' if e.errno in (errno.ECONNREFUSED, "
        "errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EACCES) else str(e))\n");
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

TEST_P(control_plane_egress, a_networked_gvisor_guest_keeps_its_memory_and_its_rules) {
  if (!gvisor()) GTEST_SKIP() << "a namespaces guest's stop keeps its disk only";
  // gVisor's netstack sends past the guest netns's own hooks: its rules hold on the host side
  // of its veth too, are there again after a restore, and go with the guest.
  auto g = create(R"({"shape":"s-1vcpu-256mb","persistent":true,"idle_ttl_seconds":0,)"
                  R"("egress":["198.51.100.9"]})");
  // The internet stand-in; a private LAN address; a LAN neighbour; the host's own address,
  // where this test listens too (its input chain, not forward: refused at once as well).
  int host_listener = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_in h{};
  h.sin_family = AF_INET;
  h.sin_port = htons(port_);
  ::inet_pton(AF_INET, "10.77.0.1", &h.sin_addr);
  ASSERT_EQ(::bind(host_listener, reinterpret_cast<sockaddr*>(&h), sizeof h), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(host_listener, 8), 0);
  const std::vector<std::string> targets{"198.51.100.9", "10.9.9.9", "203.0.113.2",
                                         "10.77.0.1"};
  const std::string expected =
      "198.51.100.9 open\n10.9.9.9 refused\n203.0.113.2 refused\n10.77.0.1 refused\n";
  EXPECT_EQ(refusals(g.id, targets), expected);
  EXPECT_EQ(reached(), std::vector<std::string>{internet_address});
  auto table = local::host_rules_table(g.id);
  auto host_table = [&] {
    auto out = local::run_command({"/usr/sbin/nft", "list", "table", "inet", table}, {});
    return out && out->exit_code == 0 ? out->output : std::string{};
  };
  EXPECT_NE(host_table().find("198.51.100.9"), std::string::npos) << "no host-side rules";

  // A counter in memory: its token is drawn once, so only the same interpreter goes on.
  auto bg = exec(g.id, "/bin/sh",
                 {"-c", "python3 -c \"$0\" </dev/null >/dev/null 2>&1 &",
                  "import os, time\ntoken = os.urandom(8).hex()\ni = 0\nwhile True:\n"
                  "    open('/workspace/c.tmp', 'w').write('%d %s' % (i, token))\n"
                  "    os.replace('/workspace/c.tmp', '/workspace/c')\n"
                  "    i += 1\n    time.sleep(0.02)\n"});
  ASSERT_EQ(bg.exit_code, 0) << bg.stderr_text;
  auto counter = [&] {
    std::pair<long, std::string> c{-1, ""};
    auto f = get_file(g.id, "/workspace/c");
    if (f.status == 200u) std::istringstream{f.body} >> c.first >> c.second;
    return c;
  };
  std::pair<long, std::string> before;
  ASSERT_TRUE(eventually([&] { return (before = counter()).first > 3; }, 30s, 20ms));

  auto stopped = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/stop"));
  EXPECT_EQ(stopped.status, sandbox_status::stopped);
  EXPECT_TRUE(
      std::filesystem::exists(state_dir_ / "guests" / g.id / "checkpoint" / "checkpoint.img"))
      << call("GET", "/v1/sandboxes/" + g.id).body;
  EXPECT_EQ(host_table(), "") << "the host-side rules go with the stopped guest's network";

  auto started = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start"));
  EXPECT_EQ(started.started_from, "checkpoint");
  EXPECT_FALSE(started.restore_error) << *started.restore_error;
  auto first = counter();
  EXPECT_EQ(first.second, before.second) << "the same interpreter, its variables kept";
  EXPECT_GE(first.first, before.first);
  EXPECT_TRUE(eventually([&] { return counter().first > first.first; }, 30s, 20ms))
      << "the restored counter runs on";
  // The restored netstack has the guest's address again, and the rules hold both ways.
  EXPECT_EQ(refusals(g.id, targets), expected);
  EXPECT_EQ(reached(), std::vector<std::string>{internet_address});
  EXPECT_NE(host_table().find("198.51.100.9"), std::string::npos);

  // What this runsc cannot save: a TCP connection on the guest's network. Such a stop keeps
  // the disk only and says why; the start boots cold.
  auto held = exec(g.id, "/bin/sh",
                   {"-c", "python3 -c \"$0\" </dev/null >/dev/null 2>&1 &",
                    "import socket, time\ns = socket.create_connection(('198.51.100.9', " +
                        std::to_string(port_) +
                        "))\nopen('/workspace/held', 'w')\n"
                        "time.sleep(3600)\n"});
  ASSERT_EQ(held.exit_code, 0) << held.stderr_text;
  ASSERT_TRUE(
      eventually([&] { return get_file(g.id, "/workspace/held").status == 200u; }, 30s, 20ms));
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  auto noted = call("GET", "/v1/sandboxes/" + g.id).body;
  EXPECT_NE(noted.find("memory not kept"), std::string::npos) << noted;
  EXPECT_NE(noted.find("cannot save a TCP connection"), std::string::npos) << noted;
  EXPECT_LT(noted.size(), 2000u) << "runsc's stack dump stays out of the note";
  auto cold = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start"));
  EXPECT_EQ(cold.started_from, "boot");
  EXPECT_EQ(refusals(g.id, targets), expected) << "the rules hold after a cold boot too";
  reached();

  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  EXPECT_EQ(host_table(), "") << "delete removes the host-side table";
  EXPECT_LT(::accept(host_listener, nullptr, nullptr), 0) << "the guest reached the host";
  ::close(host_listener);
}

GUESTFLOW_BOTH_KINDS(control_plane_egress);

} // namespace
} // namespace guestflow::testing
