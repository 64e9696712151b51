// Records of destroyed guests are pruned after --destroyed-retention-hours, in the store
// too, so that lists and sweeps stop walking them; until then they are kept as before.
#include "tests/integration/control_plane/fixture.hpp"

namespace guestflow::testing {
namespace {

using control_plane_retention = control_plane_test;
const std::string small = R"({"shape":"s-1vcpu-64mb"})";

TEST_F(control_plane_retention, destroyed_records_are_kept_for_the_default_retention) {
  auto g = create(small);
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  EXPECT_EQ(view(g.id).status, sandbox_status::destroyed);
  stop();
  start();
  EXPECT_EQ(view(g.id).status, sandbox_status::destroyed) << "24 h are not over";
  EXPECT_EQ(sandbox_total(), 1u);
}

TEST_F(control_plane_retention, destroyed_records_go_once_the_retention_is_over) {
  stop();
  start({"--destroyed-retention-hours", "0"});
  auto gone = create(small);
  auto kept = create(small);
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + gone.id).status, 200u);
  ASSERT_TRUE(eventually([&] { return sandbox_total() == 1; }))
      << "the destroyed record was not pruned";
  auto listed = data<sandbox_list>(call("GET", "/v1/sandboxes"));
  ASSERT_EQ(listed.data.size(), 1u);
  EXPECT_EQ(listed.data[0].id, kept.id) << "a live guest is never pruned";
  expect_refusal(call("GET", "/v1/sandboxes/" + gone.id), 404, "no sandbox");
  // Pruned in the store too: a restart does not bring it back.
  stop();
  start({"--destroyed-retention-hours", "1"});
  expect_refusal(call("GET", "/v1/sandboxes/" + gone.id), 404, "no sandbox");
  EXPECT_EQ(view(kept.id).status, sandbox_status::running);
}

} // namespace
} // namespace guestflow::testing
