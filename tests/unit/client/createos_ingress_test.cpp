// CreateOS's URL for a guest's port, built as its SDK's previewUrl(port, {scheme: "http"})
// builds it (tests/integration/bridge/createos/SOURCES.md), and the refusals instead of a
// made-up URL.

#include "controlplane/client/createos_ingress.hpp"

#include <gtest/gtest.h>

namespace guestflow::cp {
namespace {

sandbox_view with_ingress(std::optional<std::string> tmpl, bool enabled = true) {
  sandbox_view v;
  v.id = "sb-01KABCDEF";
  v.status = sandbox_status::running;
  v.ingress_enabled = enabled;
  v.ingress_url_template = std::move(tmpl);
  return v;
}

TEST(createos_preview_url, the_port_replaces_the_placeholder_over_http) {
  auto v = with_ingress("https://01KABCDEF-<port>.sb.example.com");
  auto u = createos_preview_url(v, 8080);
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(*u, "http://01KABCDEF-8080.sb.example.com");
  auto slash = createos_preview_url(with_ingress("https://01KABCDEF-<port>.eu.sb.example/"), 1);
  ASSERT_TRUE(slash);
  EXPECT_EQ(*slash, "http://01KABCDEF-1.eu.sb.example/");
  auto top = createos_preview_url(v, 65535);
  ASSERT_TRUE(top);
  EXPECT_EQ(*top, "http://01KABCDEF-65535.sb.example.com");
}

TEST(createos_preview_url, an_http_template_stays_http_and_only_the_first_placeholder_goes) {
  // The SDK's String.replace replaces the first occurrence only; so does this.
  auto u = createos_preview_url(with_ingress("http://x-<port>.sb.example/<port>"), 3000);
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(*u, "http://x-3000.sb.example/<port>");
}

TEST(createos_preview_url, no_ingress_is_unavailable_never_a_made_up_url) {
  for (auto v : {with_ingress(std::nullopt), with_ingress("", true),
                 with_ingress("https://x-<port>.sb.example", false)}) {
    auto u = createos_preview_url(v, 8080);
    ASSERT_FALSE(u);
    EXPECT_EQ(u.error().code, ec::unavailable);
    EXPECT_NE(u.error().message.find("sb-01KABCDEF"), std::string::npos) << u.error().message;
    EXPECT_NE(u.error().message.find("ingress_enabled"), std::string::npos)
        << u.error().message;
  }
}

TEST(createos_preview_url, a_template_without_placeholder_or_scheme_is_refused) {
  for (auto t : {"https://x.sb.example", "ftp://x-<port>.sb.example", "x-<port>.sb.example"}) {
    auto u = createos_preview_url(with_ingress(t), 8080);
    ASSERT_FALSE(u) << t;
    EXPECT_EQ(u.error().code, ec::unavailable);
    EXPECT_NE(u.error().message.find(t), std::string::npos) << u.error().message;
  }
}

} // namespace
} // namespace guestflow::cp
