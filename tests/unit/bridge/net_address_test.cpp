// common/net_address: the `--listen` parser `guestflow serve` uses, and the address type
// its server reports back (no Asio in either).

#include "common/net_address.hpp"

#include <gtest/gtest.h>
#include <string>

using namespace guestflow;

TEST(net_address, parses_v4_v6_and_localhost_with_their_flags) {
  auto v4 = parse_host_port("127.0.0.1:8470");
  ASSERT_TRUE(v4);
  EXPECT_EQ(*v4, (net_address{"127.0.0.1", 8470, false, true}));
  EXPECT_EQ(v4->to_string(), "127.0.0.1:8470");
  auto any = parse_host_port("0.0.0.0:0");
  ASSERT_TRUE(any);
  EXPECT_FALSE(any->loopback);
  EXPECT_EQ(any->port, 0u);
  auto v6 = parse_host_port("[::1]:80");
  ASSERT_TRUE(v6);
  EXPECT_EQ(*v6, (net_address{"::1", 80, true, true}));
  EXPECT_EQ(v6->to_string(), "[::1]:80");
  EXPECT_EQ(v6->url_host(), "[::1]");
  EXPECT_EQ(parse_host_port("localhost:1")->host, "127.0.0.1");
  EXPECT_TRUE(parse_host_port("127.200.3.4:1")->loopback); // all of 127.0.0.0/8
  EXPECT_FALSE(parse_host_port("[::]:1")->loopback);
  EXPECT_FALSE(parse_host_port("10.0.0.1:1")->loopback);
}

TEST(net_address, keeps_hosts_in_the_canonical_form_asio_prints) {
  EXPECT_EQ(parse_host_port("[0:0:0:0:0:0:0:1]:1")->host, "::1");
  EXPECT_EQ(parse_host_port("[FE80::1]:1")->host, "fe80::1");
  EXPECT_EQ(parse_host_port("[fe80::1%lo]:1")->host, "fe80::1%lo");
  EXPECT_EQ(make_net_address("::ffff:127.0.0.1", 5)->host, "::ffff:127.0.0.1");
}

TEST(net_address, refuses_what_is_not_host_port_saying_why) {
  struct row {
    const char* text;
    const char* why;
  };
  for (auto r : {row{"8470", "expected HOST:PORT, got '8470'"},
                 row{"127.0.0.1:", "bad port ''"}, row{"127.0.0.1:65536", "bad port '65536'"},
                 row{"127.0.0.1:+1", "bad port '+1'"}, row{"127.0.0.1:8x", "bad port '8x'"},
                 row{"example.com:80", "'example.com' is not an IP address"},
                 row{"1.2.3:80", "'1.2.3' is not an IP address"},
                 row{"[::1:80", "'[::1' is not an IP address"},
                 row{"[fe80::1%]:80", "'fe80::1%' is not an IP address"},
                 row{":80", "'' is not an IP address"}}) {
    std::string why;
    EXPECT_FALSE(parse_host_port(r.text, &why)) << r.text;
    EXPECT_EQ(why, r.why) << r.text;
  }
  EXPECT_FALSE(parse_host_port("nothing")); // without `why`
}
