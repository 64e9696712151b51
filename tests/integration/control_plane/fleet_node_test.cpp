// A control plane in a fleet (--fleet): its record in a real etcd under its lease, kept
// current; fenced (creates refused, guests running) when etcd is gone past the TTL, ready
// again with a new lease when etcd is back; out of etcd at once when it stops.
#include "fleet/etcd_client.hpp"
#include "messages/fleet.hpp"
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/etcd_process.hpp"

#include <csignal>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;
const std::string small = R"({"shape":"s-1vcpu-256mb"})";

class control_plane_fleet : public control_plane_test {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    auto c = fleet::etcd_client::make(etcd_.url());
    ASSERT_TRUE(c) << c.error().message;
    etcd_client_ = *c;
    start_node("node-a", 3);
  }

  void start_node(const std::string& node, int ttl_seconds) {
    start({"--fleet", etcd_.url(), "--node", node, "--fleet-ttl-seconds",
           std::to_string(ttl_seconds)});
  }

  /// The node's record in etcd, or nullopt (absent, unreadable, etcd down).
  std::optional<std::pair<node_capacity, int64_t>> record(const std::string& node = "node-a") {
    auto kv = etcd_client_->get("/guestflow/nodes/" + node);
    if (!kv || !*kv) return std::nullopt;
    auto rec = decode<node_capacity>((*kv)->value);
    if (!rec) {
      ADD_FAILURE() << "unreadable record: " << rec.error().message << " in " << (*kv)->value;
      return std::nullopt;
    }
    return std::make_pair(*rec, (*kv)->lease);
  }

  bool ready() {
    return call("GET", "/v1/capacity").body.find(R"("ready":true)") != std::string::npos;
  }

  std::string own_url() const { return "http://127.0.0.1:" + std::to_string(cp_->port()); }

  test_support::etcd_process etcd_;
  std::shared_ptr<fleet::etcd_client> etcd_client_;
};

TEST_F(control_plane_fleet, registers_under_a_lease_and_keeps_the_record_current) {
  ASSERT_TRUE(eventually([&] {
    auto r = record();
    return r && r->first.ready;
  })) << cp_->stderr_text();
  auto [rec, lease] = *record();
  EXPECT_NE(lease, 0) << "the record lives under the node's lease";
  EXPECT_EQ(rec.node, "node-a");
  EXPECT_EQ(rec.url, own_url()) << "--advertise defaults to the URL it listens on";
  EXPECT_EQ(rec.memory_committed_mib, 0u);
  EXPECT_EQ(rec.max_guests, 1024u);
  EXPECT_TRUE(ready());

  auto g = create(small);
  EXPECT_TRUE(eventually([&] {
    auto r = record();
    return r && r->first.memory_committed_mib == 256 && r->first.guests == 1;
  })) << "a create shows in the record";
  ASSERT_EQ(call("POST", "/v1/drain").status, 200u);
  EXPECT_TRUE(eventually([&] {
    auto r = record();
    return r && r->first.draining;
  })) << "a drain shows in the record";
  ASSERT_EQ(call("DELETE", "/v1/drain").status, 200u);
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  EXPECT_TRUE(eventually([&] {
    auto r = record();
    return r && r->first.memory_committed_mib == 0 && r->first.guests == 0 &&
           !r->first.draining;
  })) << "a delete shows in the record";
  // Kept alive past several TTLs by renewals.
  auto first_lease = lease;
  EXPECT_FALSE(eventually([&] { return !record(); }, 8s, 200ms))
      << "the record expired although the node runs";
  EXPECT_EQ(record()->second, first_lease);
}

TEST_F(control_plane_fleet, fenced_without_etcd_and_ready_again_when_it_is_back) {
  ASSERT_TRUE(eventually([&] { return ready(); })) << cp_->stderr_text();
  auto old_lease = record()->second;
  auto g = create(small);

  etcd_.kill();
  // Fenced once its lease cannot have been renewed for the TTL (3 s): the bound is the
  // property, the deadline leaves room for a loaded host.
  ASSERT_TRUE(eventually([&] { return !ready(); }, 30s)) << cp_->stderr_text();
  auto refused = call("POST", "/v1/sandboxes", small);
  EXPECT_EQ(refused.status, 429u) << refused.body;
  EXPECT_NE(refused.body.find(R"("code":"capacity")"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("is fenced"), std::string::npos) << refused.body;
  EXPECT_EQ(exec(g.id, "echo", {"alive"}).stdout_text, "alive\n")
      << "a fenced node's guests run on";
  EXPECT_NE(cp_->stderr_text().find("fenced"), std::string::npos) << cp_->stderr_text();

  etcd_.restart();
  ASSERT_TRUE(eventually([&] { return ready(); }, 30s)) << cp_->stderr_text();
  ASSERT_TRUE(eventually([&] {
    auto r = record();
    return r && r->first.ready && r->second != old_lease && r->first.guests == 1;
  })) << "registered again under a new lease";
  create(small);
  // The guest it kept is deleted as ever.
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
}

TEST_F(control_plane_fleet, a_stopped_node_leaves_etcd_at_once) {
  stop();
  start_node("node-a", 60);
  ASSERT_TRUE(eventually([&] { return ready(); })) << cp_->stderr_text();
  ASSERT_TRUE(record());
  EXPECT_EQ(stop(), 0);
  // Well within the 60 s TTL: the lease was revoked, not left to expire.
  EXPECT_TRUE(eventually([&] { return !record(); }, 15s));
  start_node("node-a", 3); // for TearDown
}

TEST_F(control_plane_fleet, a_second_node_of_the_same_name_stays_fenced_while_the_first_lives) {
  ASSERT_TRUE(eventually([&] { return ready(); })) << cp_->stderr_text();
  test_support::temp_dir other{"guestflow-cp-test"};
  control_plane_process twin{
      other.path() / "state",
      {"--fleet", etcd_.url(), "--node", "node-a", "--fleet-ttl-seconds", "3"}};
  http_client twin_client{twin.port()};
  EXPECT_TRUE(eventually([&] {
    return twin.stderr_text().find("is held by another lease") != std::string::npos;
  })) << twin.stderr_text();
  EXPECT_NE(twin_client.call("GET", "/v1/capacity").body.find(R"("ready":false)"),
            std::string::npos);
  auto refused = twin_client.call("POST", "/v1/sandboxes", small);
  EXPECT_EQ(refused.status, 429u) << refused.body;
  EXPECT_EQ(record()->first.url, own_url()) << "the first node keeps its record";
  EXPECT_EQ(twin.stop(), 0);
}

TEST_F(control_plane_fleet, after_a_kill_the_node_registers_again) {
  ASSERT_TRUE(eventually([&] { return ready(); })) << cp_->stderr_text();
  auto old_lease = record()->second;
  ::kill(cp_->pid(), SIGKILL);
  start_node("node-a", 3);
  // Its previous incarnation's lease is waited out (at most the TTL), then it registers.
  ASSERT_TRUE(eventually([&] { return ready(); }, 30s)) << cp_->stderr_text();
  auto r = record();
  ASSERT_TRUE(r);
  EXPECT_NE(r->second, old_lease);
  EXPECT_EQ(r->first.url, own_url());
}

} // namespace
} // namespace guestflow::testing
