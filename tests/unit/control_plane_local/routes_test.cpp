#include "controlplane/local/routes.hpp"

#include <gtest/gtest.h>

namespace guestflow::local {
namespace {

TEST(local_routes, match_endpoints_with_ids) {
  auto r = match_route("POST", "/v1/sandboxes/sb-1/exec");
  ASSERT_EQ(r.kind, route::outcome::found);
  EXPECT_EQ(r.ep, endpoint::exec);
  EXPECT_EQ(r.id, "sb-1");
  EXPECT_EQ(match_route("GET", "/v1/sandboxes/").ep, endpoint::list_sandboxes);
  EXPECT_EQ(match_route("PUT", "/v1/sandboxes/x/files").ep, endpoint::put_file);
  EXPECT_EQ(match_route("DELETE", "/v1/sandboxes/x").ep, endpoint::delete_sandbox);
}

TEST(local_routes, distinguish_404_from_405) {
  EXPECT_EQ(match_route("GET", "/v1/sandboxes/x/nope").kind, route::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/sandboxes//exec").kind, route::outcome::not_found);
  auto r = match_route("PATCH", "/v1/sandboxes/x/egress");
  EXPECT_EQ(r.kind, route::outcome::method_not_allowed);
  EXPECT_EQ(r.allow, "GET, PUT");
}

TEST(local_routes, targets_are_percent_decoded) {
  auto t = parse_target("/v1/sandboxes/a/files?path=%2Fworkspace%2Fa%20b+c&x");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "/v1/sandboxes/a/files");
  EXPECT_EQ(t->query.at("path"), "/workspace/a b c");
  EXPECT_EQ(t->query.at("x"), "");
  EXPECT_EQ(parse_target("/v1/x?path=%00")->query.at("path"), std::string(1, '\0'));
  EXPECT_FALSE(parse_target("/v1/x?path=%zz"));
  EXPECT_FALSE(parse_target("/v1/x?path=%4"));
  EXPECT_FALSE(parse_target("v1/x"));
}

TEST(local_routes, list_query_is_validated) {
  auto q = parse_list_query({{"status", "paused"}, {"limit", "5"}, {"offset", "10"}});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, sandbox_status::paused);
  EXPECT_EQ(q->limit, 5u);
  EXPECT_EQ(q->offset, 10u);
  EXPECT_FALSE(parse_list_query({{"limit", "-1"}}));
  EXPECT_FALSE(parse_list_query({{"limit", "5000"}}));
  EXPECT_FALSE(parse_list_query({{"status", "asleep"}}));
  EXPECT_TRUE(*parse_stream_flag({{"stream", "true"}}));
  EXPECT_FALSE(*parse_stream_flag({}));
  EXPECT_FALSE(parse_stream_flag({{"stream", "yes please"}}));
}

} // namespace
} // namespace guestflow::local
