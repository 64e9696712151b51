#pragma once

#include "messages/error.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow {

/// One address rule: an IPv4/IPv6 network with an optional destination port.
struct egress_rule {
  bool v6 = false;
  std::array<uint8_t, 16> address{}; ///< network bytes (first 4 used for IPv4), host bits zero
  uint8_t prefix = 32;               ///< CIDR prefix length (32 / 128 for a single host)
  std::optional<uint16_t> port;

  friend bool operator==(const egress_rule& a, const egress_rule& b) {
    return a.v6 == b.v6 && a.address == b.address && a.prefix == b.prefix && a.port == b.port;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_rule& x) {
  return f(x.v6, x.address, x.prefix, x.port);
}

/// A guest's network policy. On the wire (CreateOS v1): `null`, `[]` or `["*"]` allow
/// everything; `["240.0.0.0/4"]` denies everything; anything else is a list of rules.
struct egress_policy {
  enum class kind : uint8_t { allow_all, deny_all, rules };
  kind mode = kind::allow_all;
  std::vector<egress_rule> rules; ///< sorted and de-duplicated when mode == rules

  static egress_policy allow_all() { return {kind::allow_all, {}}; }
  static egress_policy deny_all() { return {kind::deny_all, {}}; }

  friend bool operator==(const egress_policy& a, const egress_policy& b) {
    return a.mode == b.mode && a.rules == b.rules;
  }
  friend bool operator!=(const egress_policy& a, const egress_policy& b) { return !(a == b); }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_policy& x) {
  return f(x.mode, x.rules);
}

/// Parses one rule: `1.2.3.4`, `10.0.0.0/8`, `1.2.3.4:443`, `10.0.0.0/8:443`, `::1`,
/// `2001:db8::/32`, `[2001:db8::1]:443`, `[2001:db8::/32]:443`. A hostname is refused with a
/// message saying CreateOS does not enforce hostname rules. `*` is not a rule (see below).
result<egress_rule> parse_egress_rule(std::string_view text);

/// Parses a wire list (`field` names it in errors, e.g. "egress"). `["*"]` and `[]` →
/// allow_all, `["240.0.0.0/4"]` → deny_all; `*` mixed with other rules is refused.
result<egress_policy> parse_egress(const std::vector<std::string>& rules,
                                   std::string_view field = "egress");

/// Canonical text of one rule (inverse of parse_egress_rule; IPv6 in RFC 5952 form).
std::string to_string(const egress_rule& rule);

/// Canonical wire list: allow_all → ["*"], deny_all → ["240.0.0.0/4"], else sorted rules.
std::vector<std::string> to_strings(const egress_policy& policy);

/// Stable one-line identity of a policy ("*", "none" or the joined rules), used in guest
/// identities so that a different policy always yields a different guest.
std::string fingerprint(const egress_policy& policy);

} // namespace guestflow
