// What apps/ includes from the local control plane compiles without Boost.Asio or Beast:
// this target is built with both forbidden (guestflow_forbid_asio in CMakeLists.txt), so an
// Asio type that creeps into serve.hpp, embedded.hpp or the route table fails the build.

#include "common/unique_fd.hpp"
#include "controlplane/local/embedded.hpp"
#include "controlplane/local/http/routes.hpp"
#include "controlplane/local/serve.hpp"

#include <gtest/gtest.h>
#include <type_traits>

using namespace guestflow;
using namespace guestflow::local;

TEST(local_layering, parse_listen_returns_a_neutral_address) {
  static_assert(std::is_same_v<decltype(parse_listen(std::string{})), result<net_address>>);
  auto a = parse_listen("127.0.0.1:8470");
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_EQ(a->port, 8470);
  EXPECT_TRUE(a->loopback);
  EXPECT_FALSE(a->v6);
  auto l = parse_listen("localhost:0");
  ASSERT_TRUE(l);
  EXPECT_EQ(l->host, "127.0.0.1");
  auto v6 = parse_listen("[::1]:9");
  ASSERT_TRUE(v6);
  EXPECT_TRUE(v6->v6);
  EXPECT_TRUE(v6->loopback);
  EXPECT_EQ(v6->url_host(), "[::1]");
  auto any = parse_listen("0.0.0.0:80");
  ASSERT_TRUE(any);
  EXPECT_FALSE(any->loopback);
}

TEST(local_layering, parse_listen_refusals_name_the_flag) {
  for (auto [text, message] :
       {std::pair{"8470", "--listen: expected HOST:PORT, got '8470'"},
        std::pair{"127.0.0.1:http", "--listen: bad port 'http'"},
        std::pair{"127.0.0.1:65536", "--listen: bad port '65536'"},
        std::pair{"example.com:80", "--listen: 'example.com' is not an IP address"}}) {
    auto a = parse_listen(text);
    ASSERT_FALSE(a) << text;
    EXPECT_EQ(a.error().code, ec::bad_request);
    EXPECT_EQ(a.error().message, message);
  }
}

TEST(local_layering, unique_fd_is_a_common_helper) {
  static_assert(std::is_same_v<unique_fd, guestflow::unique_fd>);
  unique_fd fd{::dup(0)};
  EXPECT_TRUE(fd);
  auto raw = fd.release();
  EXPECT_FALSE(fd);
  ::close(raw);
}
