// An allow-all guest reaches the internet, not the operator's networks: its rules refuse
// RFC 1918, CGNAT, multicast and the host's own networks before they accept the rest; a
// rule that names such a network lets it through. The host's networks are read in a
// network namespace the test makes (its addresses and routes only there).

#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/network/netns_egress.hpp"
#include "controlplane/local/network/netns_socket.hpp"
#include "controlplane/local/network/nft_apply.hpp"
#include "messages/egress.hpp"

#include <algorithm>
#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::local;

namespace {

/// The line of `script` that rejects TCP to a set holding `element`; npos if none.
size_t reject_line_of(const std::string& script, const std::string& element) {
  for (size_t at = 0; at < script.size();) {
    auto end = script.find('\n', at);
    auto line = script.substr(at, end - at);
    bool in_set = line.find(" " + element + ",") != std::string::npos ||
                  line.find(" " + element + " }") != std::string::npos;
    if (line.find("ip daddr {") != std::string::npos && in_set &&
        line.find("reject with tcp reset") != std::string::npos)
      return at;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return std::string::npos;
}

TEST(netns_egress, allow_all_refuses_private_cgnat_multicast_and_the_hosts_networks) {
  host_networks host{{"192.0.2.2"}, {"192.0.2.0/24", "198.51.100.0/24"}};
  auto script = render_guest_rules(egress_policy::allow_all(), host, false);
  auto accept_all = script.find("\n    accept\n");
  ASSERT_NE(accept_all, std::string::npos) << script;
  for (auto range : {"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",
                     "224.0.0.0/4", "240.0.0.0/4", "0.0.0.0/8", "169.254.0.0/16", "127.0.0.0/8",
                     "10.231.0.0/16", "192.0.2.2", "192.0.2.0/24", "198.51.100.0/24"}) {
    auto at = reject_line_of(script, range);
    EXPECT_NE(at, std::string::npos) << range << " is not refused:\n" << script;
    EXPECT_LT(at, accept_all) << range << " is refused after the accept:\n" << script;
  }
}

TEST(netns_egress, a_rule_that_names_a_private_network_lets_it_through) {
  host_networks host{{"192.0.2.2"}, {"192.0.2.0/24"}};
  auto rules = parse_egress({"172.16.9.9", "10.1.0.0/16:443"});
  ASSERT_TRUE(rules);
  auto script = render_guest_rules(*rules, host, false);
  EXPECT_NE(script.find("ip daddr 172.16.9.9/32 accept"), std::string::npos) << script;
  EXPECT_NE(script.find("ip daddr 10.1.0.0/16 meta l4proto { tcp, udp } th dport 443 accept"),
            std::string::npos)
      << script;
  // Only what every guest is refused stands before them; no blanket private refusal.
  EXPECT_EQ(reject_line_of(script, "172.16.0.0/12"), std::string::npos) << script;
  EXPECT_EQ(reject_line_of(script, "192.0.2.0/24"), std::string::npos) << script;
  EXPECT_NE(reject_line_of(script, "192.0.2.2"), std::string::npos) << script;
}

/// Runs `f` on a thread inside a fresh network namespace; the namespace's fd is passed.
template<class F>
void in_new_netns(F f) {
  std::thread t([&] {
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0);
    int fd = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    f(fd);
    ::close(fd);
  });
  t.join();
}

TEST(netns_egress, the_hosts_networks_are_its_subnets_and_routes_but_the_default) {
  if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0) GTEST_SKIP() << "needs root, ip";
  in_new_netns([](int ns) {
    command_options opt;
    opt.netns_fd = ns;
    opt.input = "link set lo up\nlink add up0 type veth peer name up1\nlink set up0 up\nlink "
                "set up1 up\n"
                "addr add 10.66.1.1/24 dev up0\naddr add 172.20.5.5/16 dev up0\n"
                "route add 198.18.0.0/15 via 10.66.1.2\nroute add default via 10.66.1.2\n";
    auto out = run_command({"/usr/sbin/ip", "-b", "-"}, opt);
    ASSERT_TRUE(out);
    ASSERT_EQ(out->exit_code, 0) << out->output;
    auto host = read_host_networks();
    auto has = [](const std::vector<std::string>& v, const std::string& x) {
      return std::find(v.begin(), v.end(), x) != v.end();
    };
    EXPECT_TRUE(has(host.addresses, "10.66.1.1"));
    EXPECT_TRUE(has(host.addresses, "172.20.5.5"));
    EXPECT_FALSE(has(host.addresses, "127.0.0.1"));
    EXPECT_TRUE(has(host.networks, "10.66.1.0/24"));
    EXPECT_TRUE(has(host.networks, "172.20.0.0/16"));
    EXPECT_TRUE(has(host.networks, "198.18.0.0/15"));
    EXPECT_FALSE(has(host.networks, "0.0.0.0/0"));
    for (auto& n : host.networks)
      EXPECT_NE(n.rfind("127.", 0), 0u) << n;

    // The kernel takes the script, overlapping ranges (10.66.1.0/24 in 10/8) and all.
    if (::access("/usr/sbin/nft", X_OK) != 0) return;
    nft_options apply;
    apply.netns_fd = ns;
    auto ok = nft_apply("/usr/sbin/nft",
                        render_guest_rules(egress_policy::allow_all(), host, false), apply);
    ASSERT_TRUE(ok) << ok.error().message;
    command_options list;
    list.netns_fd = ns;
    auto rules = run_command({"/usr/sbin/nft", "list", "table", "inet", "guestflow"}, list);
    ASSERT_TRUE(rules);
    EXPECT_NE(rules->output.find("100.64.0.0/10"), std::string::npos) << rules->output;
    EXPECT_NE(rules->output.find("198.18.0.0/15"), std::string::npos) << rules->output;
  });
}

TEST(netns_egress, a_gvisor_guests_rules_also_hold_on_its_veths_host_side) {
  // gVisor's netstack sends through a packet socket on the guest's eth0: the host side of the
  // veth is where its traffic meets netfilter (the forward chain), with the same rules.
  EXPECT_EQ(host_if_of_guest("10.231.0.6"), "gfv1");
  EXPECT_EQ(host_if_of_guest("10.231.255.254"), "gfv16383");
  EXPECT_EQ(host_if_of_guest("10.232.0.2"), "");
  EXPECT_EQ(host_rules_table("sb-12ab"), "guestflow_g_sb.12ab");
  host_networks host{{"192.0.2.2"}, {"192.0.2.0/24"}};
  auto rules = parse_egress({"172.16.9.9"});
  ASSERT_TRUE(rules);
  auto script = render_host_side_rules("sb-12ab", "gfv1", *rules, host);
  EXPECT_NE(script.find("iif \"gfv1\" jump egress"), std::string::npos) << script;
  EXPECT_NE(script.find("ip daddr 172.16.9.9/32 accept"), std::string::npos) << script;
  EXPECT_NE(reject_line_of(script, "192.0.2.2"), std::string::npos) << script;
  EXPECT_EQ(script.find("oifname \"lo\""), std::string::npos) << "no loopback on the host side";
  if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0 ||
      ::access("/usr/sbin/nft", X_OK) != 0)
    GTEST_SKIP() << "needs root, ip, nft";
  in_new_netns([&](int ns) {
    command_options opt;
    opt.netns_fd = ns;
    opt.input = "link add gfv1 type veth peer name peer1\n";
    auto out = run_command({"/usr/sbin/ip", "-b", "-"}, opt);
    ASSERT_TRUE(out);
    ASSERT_EQ(out->exit_code, 0) << out->output;
    // The kernel takes it, and takes it again (a replacement is one transaction).
    for (int i = 0; i < 2; ++i) {
      auto ok =
          nft_apply("/usr/sbin/nft", render_host_side_rules("sb-12ab", "gfv1", *rules, host));
      ASSERT_TRUE(ok) << ok.error().message << "\n" << script;
    }
    auto listed = run_command({"/usr/sbin/nft", "list", "tables"}, command_options{});
    ASSERT_TRUE(listed);
    EXPECT_NE(listed->output.find("guestflow_g_sb.12ab"), std::string::npos) << listed->output;
    ASSERT_TRUE(remove_host_side_rules(net_tools{}, "sb-12ab"));
    ASSERT_TRUE(remove_host_side_rules(net_tools{}, "sb-12ab")) << "idempotent";
    listed = run_command({"/usr/sbin/nft", "list", "tables"}, command_options{});
    ASSERT_TRUE(listed);
    EXPECT_EQ(listed->output.find("guestflow_g_"), std::string::npos) << listed->output;
  });
}

// A fork template's namespace gives the guests it clones a TCP hash table of their own, whose
// teardown walks its own buckets, not the host's; the caller's thread ends up back home.
TEST(netns_socket, a_namespace_can_give_the_namespaces_made_in_it_a_tcp_hash_of_their_own) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  int parent = -1;
  std::thread maker([&] {
    if (::unshare(CLONE_NEWNET) == 0)
      parent = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  });
  maker.join();
  ASSERT_GE(parent, 0);
  // tcp_ehash_entries of a namespace made from inside `parent` (negative: the host's table).
  auto child_hash = [&] {
    long v = 0;
    std::thread t([&] {
      ASSERT_EQ(::setns(parent, CLONE_NEWNET), 0);
      ASSERT_EQ(::unshare(CLONE_NEWNET), 0);
      std::ifstream in{"/proc/sys/net/ipv4/tcp_ehash_entries"};
      ASSERT_TRUE(in >> v);
    });
    t.join();
    return v;
  };
  EXPECT_LT(child_hash(), 0) << "by default a namespace shares the host's table";
  struct stat before {
  }, after{};
  ASSERT_EQ(::stat("/proc/thread-self/ns/net", &before), 0);
  auto ok = set_child_tcp_hash(parent, guest_tcp_hash_buckets);
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(::stat("/proc/thread-self/ns/net", &after), 0);
  EXPECT_EQ(before.st_ino, after.st_ino) << "the calling thread is back in its namespace";
  EXPECT_EQ(child_hash(), long(guest_tcp_hash_buckets));
  ::close(parent);
}

} // namespace
