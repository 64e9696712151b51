#pragma once

#include "messages/egress.hpp"
#include "messages/error.hpp"

#include <string>
#include <vector>

/// Egress for guests that have a network (allow-all and address rules; deny-all guests get
/// bwrap's empty netns instead). Each such guest gets a netns `gf-<id>` with a veth pair
/// (host side `gfv<N>`, guest side `eth0`) on its own /30 of 10.231.0.0/16, a default route
/// to the host side, and an nftables table in the guest's netns whose output chain drops
/// by default. The netns belongs to the host's user namespace, so the guest (unprivileged in
/// a child user namespace) cannot change the rules. On the host, one shared table keeps
/// guests away from the host itself and from each other, and masquerades their traffic.
namespace guestflow::local {

struct net_tools {
  std::string ip = "/usr/sbin/ip";
  std::string nft = "/usr/sbin/nft";
};

/// What a guest's network is made of (derivable again from the netns name and address).
struct guest_net {
  std::string netns;    ///< gf-<id>, bind-mounted at /run/netns/<netns>
  std::string host_if;  ///< gfv<N>
  std::string guest_ip; ///< 10.231.x.(4k+2)
  std::string gateway;  ///< 10.231.x.(4k+1), the host side
};

/// True when nftables works on this host (the tool runs and the kernel accepts the
/// host-side table in check mode). Without it, guests that need rules are refused.
bool egress_rules_supported(const net_tools& tools);

/// Idempotent and atomic (once per control plane, before its first networked guest): IPv4
/// forwarding on and the shared host table `inet guestflow_host`: nothing from a guest veth
/// reaches the host's own addresses (TCP is reset, the rest dropped), guests do not reach each
/// other, no connection enters a guest, guest traffic leaving the host is masqueraded.
result<bool> ensure_host_egress(const net_tools& tools);

/// Builds the guest's netns, veth pair, addresses, route and rules. Removes everything it
/// made when a step fails. `host_side`: the rules are also kept on the host (below).
result<guest_net> create_guest_net(const net_tools& tools, const std::string& id,
                                   const egress_policy& egress, bool host_side = false);

/// A gVisor guest's own TCP/IP (netstack, inside the Sentry) sends on the guest's eth0
/// through a packet socket: nothing it sends passes the netns's output hook. Its rules are
/// therefore also kept on the host, in a table of its own (`inet guestflow_g_<id>`, '-' as '.')
/// whose forward chain applies the same rules to what arrives on the veth's host side (the
/// interface derived from `guest_ip`), and whose input chain refuses what it sends the host
/// itself. Replaces the table atomically (also one a crash left).
result<bool> apply_host_side_rules(const net_tools& tools, const std::string& id,
                                   const std::string& guest_ip, const egress_policy& egress);

/// Deletes the guest's host-side table. Idempotent.
result<bool> remove_host_side_rules(const net_tools& tools, const std::string& id);

/// The host side of the veth whose guest side has `guest_ip` (empty: not a pool address).
std::string host_if_of_guest(const std::string& guest_ip);

/// Installs (`replace` = false, a fresh netns) or atomically replaces (one nft transaction
/// that deletes and re-adds the guest's table) the guest's rule set.
result<bool> apply_guest_rules(const net_tools& tools, const std::string& netns,
                               const egress_policy& egress, bool replace = true);

/// What of the host's own networks a guest's rules keep it from: read from the host when
/// the rules are written (its addresses and routes), so a network the host joins later is
/// refused from the next create on.
struct host_networks {
  std::vector<std::string> addresses; ///< the host's IPv4 addresses outside 127/8 and the pool
  /// a.b.c.d/n: each address's subnet and each route's destination but the default route
  /// (the LANs the host reaches directly or through a router), outside 127/8 and the pool
  std::vector<std::string> networks;
};

/// The host's networks as the kernel has them now (getifaddrs, /proc/net/route).
host_networks read_host_networks();

/// What no allow-all guest reaches: "unrestricted" means the internet, not the operator's
/// networks. RFC 1918, CGNAT (100.64.0.0/10), "this network" (0.0.0.0/8), multicast and
/// the reserved 240.0.0.0/4 (broadcast with it); link-local, loopback and the guest pool
/// are refused for every guest. A create reaches any of them only by naming it in a rule.
inline constexpr const char* non_internet_ranges =
    "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 172.16.0.0/12, 192.168.0.0/16, 224.0.0.0/4, "
    "240.0.0.0/4";

/// The nft script for a guest. Always: accept loopback, drop IPv6, reject 169.254.0.0/16,
/// 127.0.0.0/8, the guest pool 10.231.0.0/16 (the host side of every veth, other guests)
/// and the host's addresses; then, for allow_all, reject `non_internet_ranges` and the
/// host's networks and accept the rest; for rules, accept each rule's
/// address[/prefix][:port] and reject the rest. Rules are stateless (no conntrack in the
/// guest's netns: cheaper to create), so narrowing them cuts open connections too.
std::string render_guest_rules(const egress_policy& egress, const host_networks& host,
                               bool replace);

/// `inet guestflow_g_<id>`'s name, and its script for `host_if` (what the tests read).
std::string host_rules_table(const std::string& id);
std::string render_host_side_rules(const std::string& id, const std::string& host_if,
                                   const egress_policy& egress, const host_networks& host);

/// Refuses policies this backend cannot enforce exactly (IPv6 rules: guests have no IPv6).
result<bool> check_enforceable(const egress_policy& egress);

/// Deletes the netns name; the namespace dies with the guest's last process, and the kernel
/// removes its veth pair (host side included) with it. Idempotent.
result<bool> destroy_guest_net(const std::string& netns);

/// `gf-<id>`.
std::string netns_name(const std::string& id);

/// /run/netns/<name>.
std::string netns_path(const std::string& name);

} // namespace guestflow::local
