#include "controlplane/client/endpoint_selection.hpp"

#include <cstdlib>
#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::cp;

namespace {

/// The selected endpoint (by value: the result is usually a temporary).
endpoint remote(const result<endpoint_choice>& r) {
  EXPECT_TRUE(r) << (r ? "" : r.error().message);
  if (!r || !std::holds_alternative<endpoint>(*r)) return {};
  return std::get<endpoint>(*r);
}

} // namespace

TEST(cp_client_endpoint_selection, nothing_configured_is_embedded) {
  auto r = select_endpoint({});
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::holds_alternative<embedded_endpoint>(*r));
  auto blank = select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "  "},
                                {"CREATEOS_SANDBOX_API_KEY", ""},
                                {"CREATEOS_SANDBOX_BASE_URL", "https://x.example"}});
  ASSERT_TRUE(blank);
  EXPECT_TRUE(std::holds_alternative<embedded_endpoint>(*blank));
}

TEST(cp_client_endpoint_selection, guestflow_url_wins_over_createos) {
  auto r = select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:7000"},
                            {"GUESTFLOW_CONTROL_PLANE_KEY", "gk\n"},
                            {"CREATEOS_SANDBOX_API_KEY", "ck"}});
  auto ep = remote(r);
  EXPECT_EQ(ep.base_url, "http://127.0.0.1:7000");
  EXPECT_EQ(ep.api_key, "gk");
  EXPECT_EQ(ep.kind, provider::local);
  EXPECT_TRUE(ep.verify_tls);
}

TEST(cp_client_endpoint_selection, guestflow_url_without_key) {
  auto ep = remote(select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "https://cp.example"}}));
  EXPECT_EQ(ep.api_key, "");
  EXPECT_EQ(ep.kind, provider::local);
}

TEST(cp_client_endpoint_selection, createos_key_with_default_url) {
  auto ep = remote(select_endpoint({{"CREATEOS_SANDBOX_API_KEY", "k1"}}));
  EXPECT_EQ(ep.base_url, "https://api.sb.createos.sh");
  EXPECT_EQ(ep.api_key, "k1");
  EXPECT_EQ(ep.kind, provider::createos);
  EXPECT_EQ(to_string(ep.kind), "createos");
}

TEST(cp_client_endpoint_selection, createos_falls_back_to_createos_api_key) {
  auto ep = remote(select_endpoint({{"CREATEOS_API_KEY", "k2"}}));
  EXPECT_EQ(ep.api_key, "k2");
  EXPECT_EQ(ep.kind, provider::createos);
  auto both =
      remote(select_endpoint({{"CREATEOS_API_KEY", "k2"}, {"CREATEOS_SANDBOX_API_KEY", "k1"}}));
  EXPECT_EQ(both.api_key, "k1");
}

TEST(cp_client_endpoint_selection, createos_base_url_override) {
  auto ep =
      remote(select_endpoint({{"CREATEOS_SANDBOX_API_KEY", "k"},
                              {"CREATEOS_SANDBOX_BASE_URL", "https://staging.example/"}}));
  EXPECT_EQ(ep.base_url, "https://staging.example/");
  EXPECT_EQ(ep.kind, provider::createos);
}

TEST(cp_client_endpoint_selection, base_url_without_key_is_still_embedded) {
  auto r = select_endpoint({{"CREATEOS_SANDBOX_BASE_URL", "https://staging.example"}});
  ASSERT_TRUE(r);
  EXPECT_TRUE(std::holds_alternative<embedded_endpoint>(*r));
}

TEST(cp_client_endpoint_selection, bad_urls_fail_before_any_guest) {
  auto plain = select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "http://cp.example:80"}});
  ASSERT_FALSE(plain);
  EXPECT_EQ(plain.error().code, ec::policy_refused);
  auto createos_plain =
      select_endpoint({{"CREATEOS_SANDBOX_API_KEY", "k"},
                       {"CREATEOS_SANDBOX_BASE_URL", "http://api.sb.createos.sh"}});
  ASSERT_FALSE(createos_plain);
  EXPECT_EQ(createos_plain.error().code, ec::policy_refused);
  auto malformed = select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "127.0.0.1:80"}});
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().code, ec::bad_request);
  EXPECT_NE(malformed.error().message.find("GUESTFLOW_CONTROL_PLANE_URL"), std::string::npos);
}

TEST(cp_client_endpoint_selection, createos_capabilities_are_the_seed_facts) {
  auto c = createos_capabilities();
  EXPECT_EQ(c.isolation, "hardware-virtualized");
  EXPECT_TRUE(c.supports_deny_all_egress);
  EXPECT_TRUE(c.supports_address_egress_rules);
  EXPECT_FALSE(c.supports_domain_allowlist);
  EXPECT_FALSE(c.link_local_blocked);
}

TEST(cp_client_endpoint_selection, process_environment_reads_environ) {
  const char* path = std::getenv("PATH");
  ASSERT_NE(path, nullptr);
  auto env = process_environment();
  EXPECT_EQ(env["PATH"], path);
}
