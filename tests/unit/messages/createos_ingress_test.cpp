// CreateOS's ingress fields as its SDK documents them (tests/integration/bridge/createos/
// SOURCES.md): `ingress_url_template` on the create answer, `ingress_enabled` and
// `ingress_url_template` on the sandbox view; the local control plane's JSON unchanged.

#include "messages/json_codec.hpp"
#include "messages/sandbox.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

// The create answer's fields (the SDK's CreateSandboxResponse), ingress on.
constexpr const char* created_json =
    R"({"id":"sb-01KABCDEF","name":"brave-otter","ip":"10.0.0.5","shape":"s-1vcpu-256mb",)"
    R"("rootfs":"devbox:1","vcpu":1,"mem_mib":256,"disk_mib":10240,"spawn_ms":80,)"
    R"("egress":["1.2.3.4"],"bandwidth_quota_bytes":-1,)"
    R"("ingress_url_template":"https://01KABCDEF-<port>.sb.example.com"})";

// A view (the SDK's SandboxView) with ingress on.
constexpr const char* view_json =
    R"({"id":"sb-01KABCDEF","status":"running","ip":"10.0.0.5","vcpu":1,"mem_mib":256,)"
    R"("disk_mib":10240,"created_at":"2026-12-07T08:00:00Z","ingress_enabled":true,)"
    R"("ingress_url_template":"https://01KABCDEF-<port>.sb.example.com","name":"brave-otter"})";

TEST(createos_ingress, create_answer_carries_the_template) {
  auto c = decode<sandbox_created>(created_json);
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->id, "sb-01KABCDEF");
  ASSERT_TRUE(c->ingress_url_template);
  EXPECT_EQ(*c->ingress_url_template, "https://01KABCDEF-<port>.sb.example.com");
  EXPECT_TRUE(c->ingress_secret.empty());
  auto back = decode<sandbox_created>(encode(*c));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *c);
}

TEST(createos_ingress, view_carries_enabled_and_template) {
  auto v = decode<sandbox_view>(view_json);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_TRUE(v->ingress_enabled);
  ASSERT_TRUE(v->ingress_url_template);
  EXPECT_EQ(*v->ingress_url_template, "https://01KABCDEF-<port>.sb.example.com");
  auto bytes = encode(*v);
  auto back = decode<sandbox_view>(bytes);
  ASSERT_TRUE(back) << bytes;
  EXPECT_EQ(*back, *v);
  // In a list too (each element is a view).
  auto list =
      decode<sandbox_list>(std::string{R"({"data":[)"} + view_json +
                           R"(],"pagination":{"total":1,"limit":50,"offset":0,"count":1}})");
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->data.size(), 1u);
  EXPECT_EQ(list->data[0].ingress_url_template, v->ingress_url_template);
}

TEST(createos_ingress, absent_fields_are_off_and_not_written) {
  // Ingress off: CreateOS omits the template (omitempty) and sends ingress_enabled false.
  auto v = decode<sandbox_view>(
      R"({"id":"sb-1","status":"running","created_at":"x","ingress_enabled":false})");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_FALSE(v->ingress_enabled);
  EXPECT_FALSE(v->ingress_url_template);
  // The local control plane's views and create answers stay as they were.
  auto bytes = encode(*v);
  EXPECT_EQ(bytes.find("ingress"), std::string::npos) << bytes;
  sandbox_created c;
  c.id = "sb-1";
  EXPECT_EQ(encode(c).find("ingress"), std::string::npos);
}

TEST(createos_ingress, a_template_of_the_wrong_type_is_refused) {
  auto v = decode<sandbox_view>(
      R"({"id":"sb-1","status":"running","created_at":"x","ingress_url_template":8080})");
  ASSERT_FALSE(v);
  EXPECT_NE(v.error().message.find("ingress_url_template"), std::string::npos)
      << v.error().message;
  auto e = decode<sandbox_view>(
      R"({"id":"sb-1","status":"running","created_at":"x","ingress_enabled":"yes"})");
  EXPECT_FALSE(e);
}

} // namespace
} // namespace guestflow
