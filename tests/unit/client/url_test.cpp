#include "controlplane/client/url.hpp"

#include <gtest/gtest.h>
#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::cp;

TEST(cp_client_url, parses_http_loopback_with_port) {
  auto u = parse_base_url("http://127.0.0.1:8080");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8080);
  EXPECT_EQ(u->prefix, "");
  EXPECT_EQ(u->host_header, "127.0.0.1:8080");
  EXPECT_EQ(u->origin(), "http://127.0.0.1:8080");
}

TEST(cp_client_url, parses_https_default_port_prefix_and_case) {
  auto u = parse_base_url("HTTPS://API.sb.CreateOS.sh/api/");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "api.sb.createos.sh");
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->prefix, "/api");
  EXPECT_EQ(u->host_header, "api.sb.createos.sh");
}

TEST(cp_client_url, parses_ipv6_literals) {
  auto u = parse_base_url("http://[::1]:9000");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 9000);
  EXPECT_EQ(u->host_header, "[::1]:9000");
  auto v = parse_base_url("https://[2001:db8::1]");
  ASSERT_TRUE(v);
  EXPECT_EQ(v->host_header, "[2001:db8::1]");
  EXPECT_EQ(v->port, 443);
}

TEST(cp_client_url, parses_unix_socket_paths) {
  auto u = parse_base_url("unix:///run/guestflow/cp.sock");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->socket_path, "/run/guestflow/cp.sock");
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host_header, "localhost");
  EXPECT_EQ(u->prefix, "");
  EXPECT_EQ(u->origin(), "unix:///run/guestflow/cp.sock");
  EXPECT_TRUE(parse_base_url("UNIX:///" + std::string(106, 'a'))) << "107 bytes fit sun_path";
  for (std::string bad :
       std::vector<std::string>{"unix://", "unix://run/cp.sock", "unix://./cp.sock",
                                "unix:///" + std::string(107, 'a'), "unix:///run/cp.sock?x=1",
                                "unix:///run/cp.sock#f", "unix:///run/c\np.sock"}) {
    auto r = parse_base_url(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request) << bad;
  }
}

TEST(cp_client_url, refuses_malformed_urls) {
  for (auto bad : {"", "127.0.0.1:80", "ftp://host", "http://", "http://:80", "http://host:0",
                   "http://host:65536", "http://host:12a", "http://host:",
                   "http://user:pw@host", "http://host/?q=1", "http://host/#f", "http://[::1",
                   "http://[::1]x", "http://[zz::1]:80", "http://ho st", "http://host/pa th"}) {
    auto u = parse_base_url(bad);
    EXPECT_FALSE(u) << bad;
    if (!u) {
      EXPECT_EQ(u.error().code, ec::bad_request) << bad;
    }
  }
}

TEST(cp_client_url, loopback_detection) {
  for (auto h : {"localhost", "LOCALHOST", "localhost.", "127.0.0.1", "127.1.2.3",
                 "127.255.255.255", "::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback_host(h)) << h;
  for (auto h : {"128.0.0.1", "10.0.0.1", "0.0.0.0", "::", "::2", "169.254.169.254",
                 "example.com", "localhost.example.com", "mylocalhost", "127.0.0.1.nip.io",
                 "::ffff:10.0.0.1", "fe80::1"})
    EXPECT_FALSE(is_loopback_host(h)) << h;
}

TEST(cp_client_url, ip_literal_detection) {
  EXPECT_TRUE(is_ip_literal("127.0.0.1"));
  EXPECT_TRUE(is_ip_literal("::1"));
  EXPECT_FALSE(is_ip_literal("localhost"));
  EXPECT_FALSE(is_ip_literal("api.sb.createos.sh"));
}

TEST(cp_client_url, percent_encoding) {
  EXPECT_EQ(percent_encode("abc-XYZ_0.9~"), "abc-XYZ_0.9~");
  EXPECT_EQ(percent_encode("/workspace/a b&c=d?.py"), "%2Fworkspace%2Fa%20b%26c%3Dd%3F.py");
  EXPECT_EQ(percent_encode("/workspace/a b&c=d?.py", true), "/workspace/a%20b%26c%3Dd%3F.py");
  EXPECT_EQ(percent_encode("100%#+"), "100%25%23%2B");
  EXPECT_EQ(percent_encode("\xc3\xa9"), "%C3%A9");
  EXPECT_EQ(percent_encode(std::string_view("a\0b", 3)), "a%00b");
}
