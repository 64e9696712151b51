#include "controlplane/client/endpoint_selection.hpp"
#include "controlplane/client/fleet_client.hpp"

#include <gtest/gtest.h>

namespace guestflow::cp {
namespace {

TEST(fleet_selection, an_etcd_url_in_guestflow_fleet_is_a_fleet) {
  auto c = select_endpoint({{"GUESTFLOW_FLEET", " etcd://127.0.0.1:2379,127.0.0.1:2380 "},
                            {"GUESTFLOW_CONTROL_PLANE_KEY", "k"}});
  ASSERT_TRUE(c) << c.error().message;
  auto& ep = std::get<endpoint>(*c);
  EXPECT_EQ(ep.base_url, "etcd://127.0.0.1:2379,127.0.0.1:2380");
  EXPECT_EQ(ep.api_key, "k");
  EXPECT_EQ(ep.kind, provider::local);
  EXPECT_TRUE(is_fleet_url(ep.base_url));
  auto cfg = fleet_config_of(ep, {});
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->etcd_url, ep.base_url);
  EXPECT_TRUE(cfg->urls.empty());
}

TEST(fleet_selection, a_comma_list_is_a_static_fleet_each_url_checked_alone) {
  auto c = select_endpoint(
      {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:1, http://localhost:2/api"}});
  ASSERT_TRUE(c) << c.error().message;
  auto& ep = std::get<endpoint>(*c);
  EXPECT_TRUE(is_fleet_url(ep.base_url));
  auto cfg = fleet_config_of(ep, {});
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->urls,
            (std::vector<std::string>{"http://127.0.0.1:1", "http://localhost:2/api"}));

  auto plain_remote = select_endpoint(
      {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:1,http://10.0.0.1:2"}});
  ASSERT_FALSE(plain_remote);
  EXPECT_EQ(plain_remote.error().code, ec::policy_refused);
  auto malformed =
      select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:1,ftp://x"}});
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().code, ec::bad_request);
}

TEST(fleet_selection, one_url_stays_one_control_plane_and_nothing_set_stays_embedded) {
  auto one = select_endpoint({{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:1"}});
  ASSERT_TRUE(one);
  EXPECT_FALSE(is_fleet_url(std::get<endpoint>(*one).base_url));
  auto none = select_endpoint({});
  ASSERT_TRUE(none);
  EXPECT_TRUE(std::holds_alternative<embedded_endpoint>(*none));
}

TEST(fleet_selection, refuses_a_bad_etcd_url_and_both_settings_at_once) {
  auto bad = select_endpoint({{"GUESTFLOW_FLEET", "http://127.0.0.1:2379"}});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ec::bad_request);
  EXPECT_NE(bad.error().message.find("GUESTFLOW_FLEET"), std::string::npos);
  auto both = select_endpoint({{"GUESTFLOW_FLEET", "etcd://127.0.0.1:2379"},
                               {"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:1"}});
  ASSERT_FALSE(both);
  EXPECT_EQ(both.error().code, ec::bad_request);
}

} // namespace
} // namespace guestflow::cp

namespace guestflow::cp {
namespace {

TEST(fleet_metrics, prometheus_text_has_a_line_per_node_and_reason) {
  fleet_snapshot s;
  fleet_node_view n;
  n.node = "n1";
  n.reachable = true;
  n.capacity = node_capacity{"n1", 1024, 256, 1, 8, true, true, ""};
  n.placed = 3;
  s.nodes.push_back(n);
  s.failures.no_room = 2;
  auto text = prometheus_text(s);
  for (auto want : {"guestflow_fleet_node_ready{node=\"n1\"} 1\n",
                    "guestflow_fleet_node_draining{node=\"n1\"} 1\n",
                    "guestflow_fleet_node_memory_committed_mib{node=\"n1\"} 256\n",
                    "guestflow_fleet_node_memory_budget_mib{node=\"n1\"} 1024\n",
                    "guestflow_fleet_node_guests{node=\"n1\"} 1\n",
                    "guestflow_fleet_node_placed_total{node=\"n1\"} 3\n",
                    "guestflow_fleet_placement_failures_total{reason=\"no_room\"} 2\n",
                    "guestflow_fleet_placement_failures_total{reason=\"refused\"} 0\n"})
    EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
}

} // namespace
} // namespace guestflow::cp
