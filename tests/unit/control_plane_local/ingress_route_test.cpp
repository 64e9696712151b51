// Service URLs' addressing (http/ingress_route.hpp): which guest and port a request is for,
// by path or by Host, what is sent on, and the token it offers.
#include "controlplane/local/http/ingress_route.hpp"

#include <gtest/gtest.h>

namespace guestflow::local {
namespace {

TEST(ingress_route, the_path_form_names_guest_port_and_what_the_guest_is_asked_for) {
  auto r = match_ingress("/v1/sandboxes/sb-1/ports/8000/a/b%20c?x=1&token=s%2F1&y=2", "h", "");
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->id, "sb-1");
  EXPECT_EQ((*r)->port, 8000);
  EXPECT_EQ((*r)->upstream_target, "/a/b%20c?x=1&y=2"); // as sent, without the token
  EXPECT_EQ((*r)->query_token, "s/1");                  // decoded
  EXPECT_EQ((*r)->prefix, "/v1/sandboxes/sb-1/ports/8000");
  EXPECT_FALSE((*r)->needs_slash);
  auto bare = match_ingress("/v1/sandboxes/sb-1/ports/8000", "h", "");
  ASSERT_TRUE(bare && *bare);
  EXPECT_TRUE((*bare)->needs_slash);
  EXPECT_EQ((*bare)->upstream_target, "/");
}

TEST(ingress_route, other_paths_are_the_wire_apis_and_bad_ports_are_refused) {
  for (const char* t : {"/v1/sandboxes", "/v1/sandboxes/sb-1", "/v1/sandboxes/sb-1/exec",
                        "/v1/sandboxes/sb-1/portsx/1/", "/v1/sandboxes/a%2Fb/ports/1/"})
    EXPECT_FALSE(match_ingress(t, "h", "")) << t;
  for (const char* t : {"/v1/sandboxes/sb-1/ports/0/", "/v1/sandboxes/sb-1/ports/65536/",
                        "/v1/sandboxes/sb-1/ports/x/"}) {
    auto r = match_ingress(t, "h", "");
    ASSERT_TRUE(r) << t;
    EXPECT_FALSE(*r) << t;
  }
}

TEST(ingress_route, the_host_form_routes_the_whole_path_with_a_domain_only) {
  auto r = match_ingress("/x?token=t", "8080-sb-9.Apps.Test:443", "apps.test");
  ASSERT_TRUE(r && *r);
  EXPECT_EQ((*r)->id, "sb-9");
  EXPECT_EQ((*r)->port, 8080);
  EXPECT_EQ((*r)->upstream_target, "/x");
  EXPECT_EQ((*r)->prefix, "");
  EXPECT_EQ(ingress_cookie_for(**r, "t"),
            "guestflow_ingress=t; HttpOnly; SameSite=Lax; Path=/");
  EXPECT_FALSE(match_ingress("/x", "8080-sb-9.apps.test", "")); // no domain configured
  EXPECT_FALSE(match_ingress("/x", "8080-sb-9.other.test", "apps.test")); // another domain
  EXPECT_FALSE(match_ingress("/x", "a.8080-sb-9.apps.test", "apps.test"));
}

TEST(ingress_route, the_token_comes_from_the_header_then_the_query_then_the_cookie) {
  EXPECT_EQ(offered_token("h", std::string{"q"}, "guestflow_ingress=c"), "h");
  EXPECT_EQ(offered_token("", std::string{"q"}, "guestflow_ingress=c"), "q");
  EXPECT_EQ(offered_token("", std::nullopt, "a=1; guestflow_ingress=c; b=2"), "c");
  EXPECT_FALSE(offered_token("", std::nullopt, "a=1; guestflow_ingress_x=c"));
}

} // namespace
} // namespace guestflow::local
