// What apps/ includes from the bridge compiles without Boost.Asio or Beast: this file is
// built with both forbidden (guestflow_forbid_asio in CMakeLists.txt), so an Asio type that
// creeps into server.hpp (or anything it includes) fails the build here.

#include "bridge/server/server.hpp"

#include <gtest/gtest.h>
#include <type_traits>

using namespace guestflow;

TEST(layering, the_server_takes_and_reports_a_neutral_address) {
  static_assert(std::is_constructible_v<bridge::server, bridge::service&, bridge::metrics&,
                                        bridge::server_options, const net_address&>);
  static_assert(std::is_same_v<decltype(std::declval<const bridge::server&>().local_address()),
                               net_address>);
}

TEST(layering, server_options_default_to_the_limits_api_md_documents) {
  bridge::server_options o;
  EXPECT_EQ(o.max_body_bytes, uint64_t{64} << 20); // 64 MiB
  EXPECT_EQ(o.client_timeout, std::chrono::seconds{30});
  EXPECT_EQ(o.stream_backlog_bytes, size_t{8} << 20); // 8 MiB
  EXPECT_EQ(o.heartbeat, std::chrono::seconds{15});
  EXPECT_EQ(o.io_threads, 1u);
  EXPECT_TRUE(o.token.empty());
}
