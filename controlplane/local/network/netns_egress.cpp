#include "controlplane/local/network/netns_egress.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/network/nft_apply.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <ifaddrs.h>
#include <mutex>
#include <netinet/in.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <utility>

namespace guestflow::local {
namespace {

/// 10.231.0.0/16 holds 16384 guest /30s.
constexpr uint32_t pool_base = (10U << 24) | (231U << 16);
constexpr uint32_t pool_subnets = 1U << 14;
constexpr const char* pool_cidr = "10.231.0.0/16";

std::string dotted(uint32_t addr) {
  in_addr a{htonl(addr)};
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

std::string host_if_of(uint32_t subnet) {
  return "gfv" + std::to_string(subnet);
}

uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261U;
  for (unsigned char c : s)
    h = (h ^ c) * 16777619U;
  return h;
}

constexpr const char* host_table = R"(table inet guestflow_host
delete table inet guestflow_host
table inet guestflow_host {
  chain input {
    type filter hook input priority filter - 10; policy accept;
    iifname "gfv*" meta l4proto tcp reject with tcp reset
    iifname "gfv*" drop
  }
  chain forward {
    type filter hook forward priority filter - 10; policy accept;
    iifname "gfv*" oifname "gfv*" drop
    iifname "gfv*" accept
    oifname "gfv*" ct state established,related accept
    oifname "gfv*" drop
  }
  chain postrouting {
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr 10.231.0.0/16 oifname != "gfv*" masquerade
  }
}
)";

failure tool_failed(const std::string& what, const command_output& out) {
  auto msg = out.output;
  while (!msg.empty() && msg.back() == '\n')
    msg.pop_back();
  return fail(ec::unavailable,
              what + " failed (exit " + std::to_string(out.exit_code) + "): " + msg);
}

/// Runs a tool and turns a non-zero exit into a failure.
result<bool> must(const std::string& what, const std::vector<std::string>& argv,
                  const command_options& opt = {}) {
  auto out = run_command(argv, opt);
  if (!out) return out.error();
  if (out->exit_code != 0) return tool_failed(what, *out);
  return true;
}

/// `ip netns add` without the exec: a thread enters a fresh network namespace and
/// bind-mounts it at /run/netns/<name>. Like ip, /run/netns is made a shared mount point
/// first, so that deleting the name unmounts every copy (our shims' private mount
/// namespaces hold copies of /run).
result<bool> add_named_netns(const std::string& name) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock{mu};
  const char* dir = "/run/netns";
  if (::mkdir(dir, 0755) != 0 && errno != EEXIST)
    return fail(ec::unavailable, std::string{"mkdir /run/netns: "} + std::strerror(errno));
  for (bool made = false; ::mount("", dir, "none", MS_SHARED | MS_REC, nullptr) != 0;) {
    if (errno != EINVAL || made || ::mount(dir, dir, "none", MS_BIND | MS_REC, nullptr) != 0)
      return fail(ec::unavailable, std::string{"cannot make /run/netns a shared mount: "} +
                                       std::strerror(errno));
    made = true;
  }
  const auto path = netns_path(name);
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
  if (fd < 0)
    return fail(ec::unavailable, "cannot create " + path + ": " + std::strerror(errno));
  ::close(fd);
  int err = 0;
  std::thread t([&] {
    if (::unshare(CLONE_NEWNET) != 0 ||
        ::mount("/proc/thread-self/ns/net", path.c_str(), "none", MS_BIND, nullptr) != 0)
      err = errno;
  });
  t.join();
  if (err != 0) {
    ::unlink(path.c_str());
    return fail(ec::unavailable,
                "cannot create network namespace " + name + ": " + std::strerror(err));
  }
  return true;
}

/// `ip netns del`: the namespace dies with its last process, and its veth pair with it.
result<bool> delete_named_netns(const std::string& name) {
  const auto path = netns_path(name);
  ::umount2(path.c_str(), MNT_DETACH);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT)
    return fail(ec::unavailable, "cannot remove " + path + ": " + std::strerror(errno));
  return true;
}

} // namespace

std::string netns_name(const std::string& id) {
  return "gf-" + id;
}

std::string netns_path(const std::string& name) {
  return "/run/netns/" + name;
}

bool egress_rules_supported(const net_tools& tools) {
  if (::access(tools.nft.c_str(), X_OK) != 0 || ::access(tools.ip.c_str(), X_OK) != 0)
    return false;
  nft_options check;
  check.check_only = true;
  return bool(nft_apply(tools.nft, host_table, check));
}

result<bool> ensure_host_egress(const net_tools& tools) {
  // Forwarding is host-wide (replies come in on the uplink); the host table below confines
  // what the guests' veths may do with it.
  if (!write_file("/proc/sys/net/ipv4/ip_forward", "1"))
    return fail(ec::unavailable,
                std::string{"cannot enable IPv4 forwarding: "} + std::strerror(errno));
  return nft_apply(tools.nft, host_table);
}

result<bool> check_enforceable(const egress_policy& egress) {
  for (const auto& r : egress.rules)
    if (r.v6)
      return fail(ec::bad_request,
                  "egress rule \"" + to_string(r) +
                      "\" is IPv6: guests of the local control plane have no IPv6 "
                      "connectivity, so IPv6 rules cannot be honoured; use IPv4 rules");
  return true;
}

host_networks read_host_networks() {
  host_networks out;
  // Outside what every guest is refused anyway (and the pool's own /30 routes).
  auto ours = [](uint32_t a) { return (a >> 24) == 127 || (a & 0xffff0000U) == pool_base; };
  auto add = [](std::vector<std::string>& to, std::string text) {
    if (std::find(to.begin(), to.end(), text) == to.end()) to.push_back(std::move(text));
  };
  auto prefix_of = [](uint32_t mask) { return __builtin_popcount(mask); };
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) == 0) {
    for (auto* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      uint32_t a = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr);
      if (ours(a)) continue;
      add(out.addresses, dotted(a));
      if (i->ifa_netmask == nullptr) continue;
      uint32_t mask = ntohl(reinterpret_cast<sockaddr_in*>(i->ifa_netmask)->sin_addr.s_addr);
      if (mask != 0 && !ours(a & mask))
        add(out.networks, dotted(a & mask) + "/" + std::to_string(prefix_of(mask)));
    }
    ::freeifaddrs(list);
  }
  // Iface Destination Gateway Flags RefCnt Use Metric Mask ...: addresses in hex, as the
  // kernel stores them (network byte order).
  if (auto* f = std::fopen("/proc/thread-self/net/route", "re")) {
    char line[512];
    bool header = true;
    while (std::fgets(line, sizeof line, f)) {
      if (std::exchange(header, false)) continue;
      char iface[64];
      unsigned dest = 0, gateway = 0, flags = 0, refcnt = 0, use = 0, metric = 0, mask = 0;
      if (std::sscanf(line, "%63s %x %x %x %u %u %u %x", iface, &dest, &gateway, &flags,
                      &refcnt, &use, &metric, &mask) != 8)
        continue;
      uint32_t d = ntohl(dest), m = ntohl(mask);
      if (m == 0 || ours(d & m)) continue; // the default route is the internet
      add(out.networks, dotted(d & m) + "/" + std::to_string(prefix_of(m)));
    }
    std::fclose(f);
  }
  return out;
}

namespace {

/// The rules after the chain's head: what every guest is refused, then its policy, then
/// refuse the rest (stateless either way).
std::string rule_lines(const egress_policy& egress, const host_networks& host) {
  std::string s = "    meta nfproto ipv6 drop\n";
  auto reject = [&s](const std::string& set) {
    s += "    ip daddr " + set + " meta l4proto tcp reject with tcp reset\n";
    s += "    ip daddr " + set + " reject with icmpx type admin-prohibited\n";
  };
  std::string blocked = std::string{"{ 169.254.0.0/16, 127.0.0.0/8, "} + pool_cidr;
  for (const auto& a : host.addresses)
    blocked += ", " + a;
  reject(blocked + " }");
  if (egress.mode == egress_policy::kind::allow_all) {
    std::string lan = std::string{"{ "} + non_internet_ranges;
    for (const auto& n : host.networks)
      lan += ", " + n;
    reject(lan + " }");
    s += "    accept\n";
  } else if (egress.mode == egress_policy::kind::rules) {
    for (const auto& r : egress.rules) {
      if (r.v6) continue; // refused by check_enforceable; never widen
      uint32_t a = (uint32_t(r.address[0]) << 24) | (uint32_t(r.address[1]) << 16) |
                   (uint32_t(r.address[2]) << 8) | uint32_t(r.address[3]);
      s += "    ip daddr " + dotted(a) + "/" + std::to_string(r.prefix);
      if (r.port) s += " meta l4proto { tcp, udp } th dport " + std::to_string(*r.port);
      s += " accept\n";
    }
  }
  s += "    meta l4proto tcp reject with tcp reset\n"
       "    reject with icmpx type admin-prohibited\n";
  return s;
}

uint32_t parse_dotted(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1) return 0;
  return ntohl(a.s_addr);
}

} // namespace

std::string render_guest_rules(const egress_policy& egress, const host_networks& host,
                               bool replace) {
  // Deleting a table makes the kernel wait for an RCU grace period (~10 ms): a fresh netns
  // has nothing to replace.
  std::string s = replace ? "table inet guestflow\ndelete table inet guestflow\n" : "";
  return s +
         "table inet guestflow {\n"
         "  chain output {\n"
         "    type filter hook output priority filter; policy drop;\n"
         "    oifname \"lo\" accept\n" +
         rule_lines(egress, host) + "  }\n}\n";
}

std::string host_rules_table(const std::string& id) {
  // nft names take no '-'; ids never hold a '.', so the mapping is one to one.
  auto name = "guestflow_g_" + id;
  std::replace(name.begin(), name.end(), '-', '.');
  return name;
}

std::string render_host_side_rules(const std::string& id, const std::string& host_if,
                                   const egress_policy& egress, const host_networks& host) {
  // Always replaced whole: a table of this name left by a crash goes in the same transaction.
  // `iif` is the interface's index, resolved now: a stale table never matches a later veth
  // that reuses the name. After the host table's forward chain (priority filter - 10),
  // which accepts what guests send: a packet passes only when every base chain accepts it.
  const auto t = "inet " + host_rules_table(id);
  return "table " + t + "\ndelete table " + t + "\ntable " + t +
         " {\n"
         "  chain forward {\n"
         "    type filter hook forward priority filter - 5; policy accept;\n"
         "    iif \"" +
         host_if +
         "\" jump egress\n"
         "  }\n"
         // Before the host table's input chain (which drops all but TCP): what a guest sends
         // the host itself is refused at once, as in the guest's own output chain.
         "  chain input {\n"
         "    type filter hook input priority filter - 20; policy accept;\n"
         "    iif \"" +
         host_if +
         "\" meta l4proto tcp reject with tcp reset\n"
         "    iif \"" +
         host_if +
         "\" reject with icmpx type admin-prohibited\n"
         "  }\n"
         "  chain egress {\n" +
         rule_lines(egress, host) + "  }\n}\n";
}

std::string host_if_of_guest(const std::string& guest_ip) {
  const uint32_t a = parse_dotted(guest_ip);
  if ((a & 0xffff0000U) != pool_base) return {};
  return host_if_of((a - pool_base) >> 2);
}

result<bool> apply_host_side_rules(const net_tools& tools, const std::string& id,
                                   const std::string& guest_ip, const egress_policy& egress) {
  if (auto ok = check_enforceable(egress); !ok) return ok;
  const auto host_if = host_if_of_guest(guest_ip);
  if (host_if.empty())
    return fail(ec::unavailable, "guest address " + guest_ip + " is not in " + pool_cidr);
  return nft_apply(tools.nft,
                   render_host_side_rules(id, host_if, egress, read_host_networks()));
}

result<bool> remove_host_side_rules(const net_tools& tools, const std::string& id) {
  const auto t = "inet " + host_rules_table(id);
  return nft_apply(tools.nft, "table " + t + "\ndelete table " + t + "\n");
}

result<bool> apply_guest_rules(const net_tools& tools, const std::string& netns,
                               const egress_policy& egress, bool replace) {
  if (auto ok = check_enforceable(egress); !ok) return ok;
  unique_fd ns{::open(netns_path(netns).c_str(), O_RDONLY | O_CLOEXEC)};
  if (!ns) return fail(ec::not_found, "the guest's network namespace " + netns + " is gone");
  nft_options opt;
  opt.netns_fd = ns.get();
  // No IPv6 at all inside (it leaked through fe80:: before): belt and braces with the
  // table's ipv6 drop.
  opt.netns_sysctls = {{"/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"},
                       {"/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"}};
  return nft_apply(tools.nft, render_guest_rules(egress, read_host_networks(), replace), opt);
}

result<guest_net> create_guest_net(const net_tools& tools, const std::string& id,
                                   const egress_policy& egress, bool host_side) {
  if (auto ok = check_enforceable(egress); !ok) return ok.error();
  guest_net net;
  net.netns = netns_name(id);
  if (auto ok = add_named_netns(net.netns); !ok) return ok.error();
  auto undo = [&](failure f) -> failure {
    destroy_guest_net(net.netns);
    return f;
  };

  // Pick a free /30: the host-side interface name encodes the subnet, and creating a link
  // whose name exists fails atomically, so concurrent control planes never share one.
  const uint32_t start = fnv1a(id) % pool_subnets;
  for (uint32_t attempt = 0;; ++attempt) {
    if (attempt == 256)
      return undo(fail(ec::capacity, "no free guest subnet in " + std::string{pool_cidr}));
    const uint32_t subnet = (start + attempt) % pool_subnets;
    const uint32_t base = pool_base + (subnet << 2);
    command_options opt;
    opt.input = "link add " + host_if_of(subnet) + " type veth peer name eth0 netns " +
                net.netns + "\naddr add " + dotted(base + 1) + "/30 dev " + host_if_of(subnet) +
                "\nlink set " + host_if_of(subnet) + " up\n";
    auto out = run_command({tools.ip, "-b", "-"}, opt);
    if (!out) return undo(out.error());
    if (out->exit_code == 0) {
      net.host_if = host_if_of(subnet);
      net.gateway = dotted(base + 1);
      net.guest_ip = dotted(base + 2);
      break;
    }
    if (out->output.find("File exists") != std::string::npos &&
        out->output.find("-:1") != std::string::npos)
      continue; // that subnet is taken
    // A later line failed: the link exists; it dies with our netns (undo).
    return undo(tool_failed("ip (host side of the veth)", *out));
  }
  write_file("/proc/sys/net/ipv6/conf/" + net.host_if + "/disable_ipv6", "1");
  if (!write_file("/proc/sys/net/ipv4/conf/" + net.host_if + "/route_localnet", "0"))
    return undo(fail(ec::unavailable, "cannot keep route_localnet off on " + net.host_if));

  unique_fd ns{::open(netns_path(net.netns).c_str(), O_RDONLY | O_CLOEXEC)};
  if (!ns)
    return undo(fail(ec::unavailable,
                     "cannot open " + netns_path(net.netns) + ": " + std::strerror(errno)));
  command_options inside;
  inside.netns_fd = ns.get();
  inside.input = "link set lo up\naddr add " + net.guest_ip +
                 "/30 dev eth0\nlink set eth0 up\n"
                 "route add default via " +
                 net.gateway + "\n";
  if (auto ok = must("ip (guest side of the veth)", {tools.ip, "-b", "-"}, inside); !ok)
    return undo(ok.error());
  if (auto ok = apply_guest_rules(tools, net.netns, egress, false); !ok)
    return undo(ok.error());
  if (host_side)
    if (auto ok = apply_host_side_rules(tools, id, net.guest_ip, egress); !ok) {
      remove_host_side_rules(tools, id);
      return undo(ok.error());
    }
  return net;
}

result<bool> destroy_guest_net(const std::string& netns) {
  if (netns.empty()) return true;
  return delete_named_netns(netns);
}

} // namespace guestflow::local
