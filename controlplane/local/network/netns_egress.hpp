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
/// made when a step fails.
result<guest_net> create_guest_net(const net_tools& tools, const std::string& id,
                                   const egress_policy& egress);

/// Installs (`replace` = false, a fresh netns) or atomically replaces (one nft transaction
/// that deletes and re-adds the guest's table) the guest's rule set.
result<bool> apply_guest_rules(const net_tools& tools, const std::string& netns,
                               const egress_policy& egress, bool replace = true);

/// The nft script for a guest. Always: accept loopback, drop IPv6, reject 169.254.0.0/16,
/// 127.0.0.0/8, the guest pool 10.231.0.0/16 (the host side of every veth, other guests)
/// and `host_addresses`; then accept everything (allow_all) or each rule's
/// address[/prefix][:port]; reject the rest. Rules are stateless (no conntrack in the guest's
/// netns: cheaper to create), so narrowing them cuts open connections too.
std::string render_guest_rules(const egress_policy& egress,
                               const std::vector<std::string>& host_addresses, bool replace);

/// The host's IPv4 addresses outside 127/8 and the guest pool (rejected inside guests; the
/// host table drops whatever appears later).
std::vector<std::string> host_ipv4_addresses();

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
