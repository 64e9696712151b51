#include "messages/egress.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "messages/json.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cctype>
#include <tuple>

namespace guestflow {
namespace {

constexpr std::string_view deny_all_rule = "240.0.0.0/4";

/// A port or prefix length inside a rule: common/numbers' rule, but bare — no blanks around
/// it (they would sit inside the rule) and no more digits than 65535 has.
bool parse_decimal(std::string_view s, unsigned max, unsigned& out) {
  if (s.size() > 5 || trim(s).size() != s.size()) return false;
  auto v = parse_uint_as<unsigned>(s, 0, max);
  if (v) out = *v;
  return v.has_value();
}

bool looks_like_hostname(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '*';
  });
}

failure refuse(std::string_view text, std::string_view why) {
  std::string msg = quote_json(text);
  msg += ' ';
  msg.append(why.data(), why.size());
  return fail(ec::bad_request, std::move(msg));
}

failure hostname(std::string_view text) {
  return refuse(text, "is a hostname rule: CreateOS does not enforce hostname egress rules, "
                      "so they are refused; use IP addresses or CIDRs");
}

bool less(const egress_rule& a, const egress_rule& b) {
  return std::tie(a.v6, a.address, a.prefix, a.port) <
         std::tie(b.v6, b.address, b.prefix, b.port);
}

/// Parses `addr[/prefix]` of the given family into `rule` (no port).
std::optional<failure> parse_network(std::string_view text, std::string_view net, bool v6,
                                     egress_rule& rule) {
  auto slash = net.find('/');
  auto addr = std::string{net.substr(0, slash)};
  rule.v6 = v6;
  rule.address = {};
  if (addr.find('\0') != std::string::npos ||
      inet_pton(v6 ? AF_INET6 : AF_INET, addr.c_str(), rule.address.data()) != 1) {
    if (looks_like_hostname(addr)) return hostname(text);
    return refuse(text, v6 ? "is not an IPv6 address or CIDR"
                           : "is not an IPv4/IPv6 address or CIDR");
  }
  unsigned width = v6 ? 128 : 32;
  unsigned prefix = width;
  if (slash != std::string_view::npos && !parse_decimal(net.substr(slash + 1), width, prefix))
    return refuse(text,
                  "has an invalid prefix length (expected 0.." + std::to_string(width) + ")");
  rule.prefix = static_cast<uint8_t>(prefix);
  // Host bits must be zero: "10.0.0.1/8" is ambiguous, so it is an error, not masked.
  auto bytes = width / 8;
  for (unsigned bit = prefix; bit < width; ++bit) {
    auto byte = bit / 8;
    if (byte < bytes && (rule.address[byte] & (0x80 >> (bit % 8))) != 0) {
      egress_rule masked = rule;
      for (unsigned b = prefix; b < width; ++b)
        masked.address[b / 8] &= static_cast<uint8_t>(~(0x80 >> (b % 8)));
      masked.port.reset();
      return refuse(text, "has host bits set beyond /" + std::to_string(prefix) +
                              "; the network is " + to_string(masked));
    }
  }
  return std::nullopt;
}

} // namespace

result<egress_rule> parse_egress_rule(std::string_view text) {
  if (text.empty()) return fail(ec::bad_request, "\"\" is not an egress rule (empty)");
  if (text == "*")
    return refuse(text, "is not a rule: it means allow-all and must stand alone");
  if (text.find('%') != std::string_view::npos)
    return refuse(text, "has an IPv6 zone id, which egress rules do not support");
  egress_rule rule;
  std::string_view net;
  std::string_view port;
  bool has_port = false;
  bool v6 = false;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos) return refuse(text, "is missing the closing ']'");
    net = text.substr(1, close - 1);
    auto rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return refuse(text, "has unexpected text after ']'");
      port = rest.substr(1);
      has_port = true;
    }
    v6 = true;
    if (net.find(':') == std::string_view::npos) {
      if (looks_like_hostname(net)) return hostname(text);
      return refuse(text, "uses brackets, which are only for IPv6 addresses");
    }
  } else {
    auto colons = std::count(text.begin(), text.end(), ':');
    if (colons == 1) {
      auto c = text.find(':');
      net = text.substr(0, c);
      port = text.substr(c + 1);
      has_port = true;
    } else {
      net = text;
      v6 = colons >= 2;
    }
  }
  if (auto err = parse_network(text, net, v6, rule)) return std::move(*err);
  if (has_port) {
    unsigned p = 0;
    if (!parse_decimal(port, 65535, p) || p == 0)
      return refuse(text, "has an invalid port (expected 1..65535)");
    rule.port = static_cast<uint16_t>(p);
  }
  return rule;
}

result<egress_policy> parse_egress(const std::vector<std::string>& rules,
                                   std::string_view field) {
  if (rules.empty()) return egress_policy::allow_all();
  bool star = false;
  std::vector<egress_rule> out;
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i] == "*") {
      star = true;
      continue;
    }
    auto r = parse_egress_rule(rules[i]);
    if (!r)
      return fail(ec::bad_request,
                  std::string{field} + "[" + std::to_string(i) + "]: " + r.error().message);
    out.push_back(*r);
  }
  if (star) {
    if (!out.empty())
      return fail(ec::bad_request,
                  std::string{field} +
                      ": \"*\" (allow all) cannot be combined with other rules");
    return egress_policy::allow_all();
  }
  std::sort(out.begin(), out.end(), less);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.size() == 1 && to_string(out[0]) == deny_all_rule) return egress_policy::deny_all();
  return egress_policy{egress_policy::kind::rules, std::move(out)};
}

std::string to_string(const egress_rule& rule) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(rule.v6 ? AF_INET6 : AF_INET, rule.address.data(), buf, sizeof(buf));
  std::string net = buf;
  if (rule.prefix != (rule.v6 ? 128 : 32)) {
    net += '/';
    net += std::to_string(rule.prefix);
  }
  if (!rule.port) return net;
  auto port = std::to_string(*rule.port);
  return rule.v6 ? "[" + net + "]:" + port : net + ":" + port;
}

std::vector<std::string> to_strings(const egress_policy& policy) {
  switch (policy.mode) {
  case egress_policy::kind::allow_all:
    return {"*"};
  case egress_policy::kind::deny_all:
    return {std::string{deny_all_rule}};
  case egress_policy::kind::rules:
    break;
  }
  auto rules = policy.rules;
  std::sort(rules.begin(), rules.end(), less);
  rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
  // A rule list that allows nothing is deny-all: fail closed, never "[]" (= allow all).
  if (rules.empty()) return {std::string{deny_all_rule}};
  std::vector<std::string> out;
  out.reserve(rules.size());
  for (auto& r : rules)
    out.push_back(to_string(r));
  return out;
}

std::string fingerprint(const egress_policy& policy) {
  if (policy.mode == egress_policy::kind::allow_all) return "*";
  auto rules = to_strings(policy);
  if (rules.size() == 1 && rules[0] == deny_all_rule) return "none";
  std::string out;
  for (auto& r : rules) {
    if (!out.empty()) out += ',';
    out += r;
  }
  return out;
}

} // namespace guestflow
