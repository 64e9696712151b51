// Egress grammar: parsing, normalization, policy modes and fingerprints.

#include "messages/egress.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

namespace guestflow {
namespace {

struct good_rule {
  std::string input;
  std::string canonical;
};

class egress_rule : public ::testing::TestWithParam<good_rule> {};

TEST_P(egress_rule, parses_to_its_canonical_form) {
  auto r = parse_egress_rule(GetParam().input);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(to_string(*r), GetParam().canonical);
  auto again = parse_egress_rule(to_string(*r));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *r);
}

INSTANTIATE_TEST_SUITE_P(
    grammar, egress_rule,
    ::testing::Values(
        good_rule{"1.2.3.4", "1.2.3.4"}, good_rule{"1.2.3.4/32", "1.2.3.4"},
        good_rule{"10.0.0.0/8", "10.0.0.0/8"}, good_rule{"0.0.0.0/0", "0.0.0.0/0"},
        good_rule{"1.2.3.4:443", "1.2.3.4:443"}, good_rule{"10.0.0.0/8:443", "10.0.0.0/8:443"},
        good_rule{"::1", "::1"}, good_rule{"2001:DB8:0:0:0:0:0:1", "2001:db8::1"},
        good_rule{"2001:db8::/32", "2001:db8::/32"},
        good_rule{"[2001:db8::1]:443", "[2001:db8::1]:443"},
        good_rule{"[2001:db8::/32]:443", "[2001:db8::/32]:443"}, good_rule{"[::1]", "::1"},
        good_rule{"::/0", "::/0"}, good_rule{"2001:db8:0:1:0:0:0:1", "2001:db8:0:1::1"}),
    [](const ::testing::TestParamInfo<good_rule>& info) {
      std::string name;
      for (char c : info.param.input)
        name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name + "_" + std::to_string(info.index);
    });

TEST(egress, rule_fields) {
  auto r = parse_egress_rule("[2001:db8::/32]:443");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->v6);
  EXPECT_EQ(r->prefix, 32);
  EXPECT_EQ(r->port, uint16_t{443});
  EXPECT_EQ(r->address[0], 0x20);
  EXPECT_EQ(r->address[1], 0x01);
  auto v4 = parse_egress_rule("192.168.0.0/16");
  ASSERT_TRUE(v4);
  EXPECT_FALSE(v4->v6);
  EXPECT_EQ(v4->prefix, 16);
  EXPECT_FALSE(v4->port.has_value());
  EXPECT_EQ(v4->address[0], 192);
  EXPECT_EQ(v4->address[1], 168);
}

TEST(egress, hostnames_are_refused_with_the_reason) {
  for (auto host :
       {"pypi.org", "*.pypi.org", "pypi.org:443", "localhost", "[example.com]:80"}) {
    auto r = parse_egress_rule(host);
    ASSERT_FALSE(r) << host;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find("CreateOS does not enforce hostname egress rules"),
              std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("refused"), std::string::npos);
  }
}

TEST(egress, hex_looking_ipv6_is_not_a_hostname) {
  auto r = parse_egress_rule("fe80::abcd");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->v6);
}

TEST(egress, host_bits_are_an_error_not_masked) {
  auto r = parse_egress_rule("192.168.1.7/24");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("192.168.1.0/24"), std::string::npos) << r.error().message;
}

TEST(egress, policy_modes) {
  EXPECT_EQ(*parse_egress({}), egress_policy::allow_all());
  EXPECT_EQ(*parse_egress({"*"}), egress_policy::allow_all());
  EXPECT_EQ(*parse_egress({"*", "*"}), egress_policy::allow_all());
  EXPECT_EQ(*parse_egress({"240.0.0.0/4"}), egress_policy::deny_all());
  EXPECT_EQ(*parse_egress({"240.0.0.0/4", "240.0.0.0/4"}), egress_policy::deny_all());
  auto rules = parse_egress({"240.0.0.0/4", "10.0.0.0/8"});
  ASSERT_TRUE(rules);
  EXPECT_EQ(rules->mode, egress_policy::kind::rules);
  EXPECT_EQ(rules->rules.size(), 2u);
}

TEST(egress, rules_are_sorted_and_deduplicated) {
  auto p = parse_egress({"10.0.0.0/8", "::1", "1.2.3.4:80", "10.0.0.0/8", "1.2.3.4"});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(to_strings(*p),
            (std::vector<std::string>{"1.2.3.4", "1.2.3.4:80", "10.0.0.0/8", "::1"}));
  auto q = parse_egress({"::1", "1.2.3.4", "10.0.0.0/8", "1.2.3.4:80"});
  ASSERT_TRUE(q);
  EXPECT_EQ(*p, *q) << "order of the input does not matter";
}

TEST(egress, errors_name_the_field_and_index) {
  auto p = parse_egress({"1.2.3.4", "nope.example"}, "CREATEOS_EXECUTOR_EGRESS");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message.rfind("CREATEOS_EXECUTOR_EGRESS[1]: ", 0), 0u)
      << p.error().message;
}

TEST(egress, wire_lists_of_each_mode) {
  EXPECT_EQ(to_strings(egress_policy::allow_all()), std::vector<std::string>{"*"});
  EXPECT_EQ(to_strings(egress_policy::deny_all()), std::vector<std::string>{"240.0.0.0/4"});
  egress_policy empty_rules{egress_policy::kind::rules, {}};
  EXPECT_EQ(to_strings(empty_rules), std::vector<std::string>{"240.0.0.0/4"})
      << "a rule list that allows nothing fails closed, never [] (= allow all)";
}

TEST(egress, fingerprints_are_stable_and_distinct) {
  auto a = *parse_egress({"10.0.0.0/8", "1.2.3.4"});
  auto b = *parse_egress({"1.2.3.4", "10.0.0.0/8"});
  EXPECT_EQ(fingerprint(a), fingerprint(b));
  EXPECT_EQ(fingerprint(a), "1.2.3.4,10.0.0.0/8");
  EXPECT_EQ(fingerprint(egress_policy::allow_all()), "*");
  EXPECT_EQ(fingerprint(egress_policy::deny_all()), "none");
  auto c = *parse_egress({"1.2.3.4:443", "10.0.0.0/8"});
  EXPECT_NE(fingerprint(a), fingerprint(c));
  EXPECT_NE(fingerprint(a), fingerprint(egress_policy::allow_all()));
}

} // namespace
} // namespace guestflow
