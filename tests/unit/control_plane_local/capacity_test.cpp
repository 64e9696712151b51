#include "controlplane/local/service/capacity.hpp"
#include "controlplane/local/service/shapes.hpp"
#include "controlplane/local/store/record_store.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <thread>

namespace guestflow::local {
namespace {

using namespace std::chrono_literals;

shape shape_of(const char* id) {
  auto s = find_shape(id);
  EXPECT_TRUE(s) << id;
  return s.value_or(shape{});
}

capacity_gate gate(uint64_t budget_mib, uint32_t max_guests) {
  return capacity_gate{"node-a", {budget_mib, max_guests}};
}

TEST(capacity_gate, admits_up_to_the_memory_budget_and_no_further) {
  auto g = gate(1024, 10);
  auto s256 = shape_of("s-1vcpu-256mb");
  EXPECT_FALSE(g.admit({0, 0}, s256));
  EXPECT_FALSE(g.admit({768, 3}, s256)) << "an exact fit is admitted";
  auto full = g.admit({1024 - 255, 3}, s256);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->code, ec::capacity);
  EXPECT_EQ(full->message, "node node-a is full: s-1vcpu-256mb needs 256 MiB and 769 of 1024 "
                           "MiB are committed (--memory-budget-mb)");
  auto too_big = g.admit({0, 0}, shape_of("s-2vcpu-2gb"));
  ASSERT_TRUE(too_big) << "a shape larger than the whole budget never fits";
  EXPECT_EQ(too_big->code, ec::capacity);
}

TEST(capacity_gate, admits_up_to_max_guests_and_no_further) {
  auto g = gate(1 << 20, 2);
  auto s64 = shape_of("s-1vcpu-64mb");
  EXPECT_FALSE(g.admit({128, 1}, s64));
  auto full = g.admit({128, 2}, s64);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->code, ec::capacity);
  EXPECT_EQ(full->message, "node node-a is full: 2 of 2 sandboxes (--max-guests)");
}

TEST(capacity_gate, drain_refuses_every_create_until_it_ends) {
  auto g = gate(4096, 10);
  auto s = shape_of("s-1vcpu-256mb");
  EXPECT_TRUE(g.set_draining(true));
  EXPECT_FALSE(g.set_draining(true)) << "a second drain changes nothing";
  auto refused = g.admit({0, 0}, s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ec::capacity);
  EXPECT_NE(refused->message.find("is draining"), std::string::npos) << refused->message;
  EXPECT_TRUE(g.status({0, 0}).draining);
  EXPECT_TRUE(g.set_draining(false));
  EXPECT_FALSE(g.admit({0, 0}, s));
}

TEST(capacity_gate, a_fenced_node_refuses_and_says_so_first) {
  auto g = gate(4096, 1);
  g.set_draining(true);
  EXPECT_TRUE(g.set_ready(false));
  auto refused = g.admit({4096, 1}, shape_of("s-1vcpu-256mb"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, ec::capacity);
  EXPECT_NE(refused->message.find("is fenced"), std::string::npos)
      << "fenced is named before draining and full: " << refused->message;
  EXPECT_FALSE(g.status({}).ready);
  g.set_ready(true);
  g.set_draining(false);
  EXPECT_FALSE(g.admit({0, 0}, shape_of("s-1vcpu-256mb")));
}

TEST(capacity_gate, status_carries_limits_usage_and_switches) {
  auto g = gate(2048, 7);
  auto st = g.status({512, 2});
  EXPECT_EQ(st.node, "node-a");
  EXPECT_EQ(st.memory_budget_mib, 2048u);
  EXPECT_EQ(st.memory_committed_mib, 512u);
  EXPECT_EQ(st.guests, 2u);
  EXPECT_EQ(st.max_guests, 7u);
  EXPECT_FALSE(st.draining);
  EXPECT_TRUE(st.ready) << "a node without a fleet is ready";
  EXPECT_EQ(encode_capacity(st),
            R"({"node":"node-a","memory_budget_mib":2048,"memory_committed_mib":512,)"
            R"("guests":2,"max_guests":7,"draining":false,"ready":true})");
  EXPECT_EQ(encode_capacity(st, "http://127.0.0.1:9"),
            R"({"node":"node-a","memory_budget_mib":2048,"memory_committed_mib":512,)"
            R"("guests":2,"max_guests":7,"draining":false,"ready":true,)"
            R"("url":"http://127.0.0.1:9"})");
}

TEST(capacity_gate, a_watcher_wakes_on_a_change_and_not_without_one) {
  auto g = gate(2048, 7);
  auto seen = g.version();
  EXPECT_EQ(g.wait_change(seen, std::chrono::steady_clock::now() + 20ms), seen)
      << "nothing changed: the wait ends at its deadline with the same version";
  std::thread changer{[&] { g.set_draining(true); }};
  auto after = g.wait_change(seen, std::chrono::steady_clock::now() + 60s);
  changer.join();
  EXPECT_NE(after, seen);
  seen = g.version();
  EXPECT_FALSE(g.set_draining(true));
  EXPECT_EQ(g.version(), seen) << "a switch set to what it was is no change";
  std::thread waker{[&] { g.wake(); }};
  auto woken = g.wait_change(seen, std::chrono::steady_clock::now() + 60s);
  waker.join();
  EXPECT_EQ(woken, seen) << "wake() ends the wait without a change";
}

TEST(capacity_defaults, budget_is_most_of_the_host_and_names_are_checked) {
  auto budget = default_memory_budget_mib();
  ASSERT_TRUE(budget) << "/proc/meminfo has MemTotal on Linux";
  EXPECT_GT(*budget, 0u);
  EXPECT_TRUE(parse_node_name(host_node_name(), "--node"));
  EXPECT_TRUE(parse_node_name("node-1.rack_2", "--node"));
  for (const char* bad : {"", "-x", "a/b", "a b", "é", ".hidden"}) {
    auto r = parse_node_name(bad, "--node");
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_EQ(r.error().message.rfind("--node: ", 0), 0u) << r.error().message;
  }
  EXPECT_FALSE(parse_node_name(std::string(64, 'a'), "--node"));
}

guest_record ended_record(const std::string& id, sandbox_status status, int64_t ended_at) {
  guest_record r;
  r.id = id;
  r.name = id;
  r.status = status;
  r.shape = "s-1vcpu-256mb";
  r.rootfs = "debian:12";
  r.egress = egress_policy::deny_all();
  r.envs = {{"K", "v"}};
  r.created_at = "2026-12-01T00:00:00.000Z";
  r.runtime.id = id;
  r.ended_at = ended_at;
  return r;
}

TEST(record_pruning, ended_at_survives_a_reopen_and_erase_all_forgets_records) {
  test_support::temp_dir d{"guestflow-prune-store"};
  auto file = d.path() / "control-plane.db";
  {
    auto store = record_store::open(file);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->put(ended_record("sb-a", sandbox_status::destroyed, 1'700'000'000)));
    ASSERT_TRUE((*store)->put(ended_record("sb-b", sandbox_status::failed, 1'700'000'001)));
    ASSERT_TRUE((*store)->put(ended_record("sb-c", sandbox_status::running, 0)));
  }
  auto store = record_store::open(file);
  ASSERT_TRUE(store);
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].ended_at, 1'700'000'000);
  EXPECT_EQ((*all)[1].ended_at, 1'700'000'001);
  EXPECT_EQ((*all)[2].ended_at, 0);
  ASSERT_TRUE((*store)->erase_all({"sb-a", "sb-b"}));
  auto left = (*store)->load_all();
  ASSERT_TRUE(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].id, "sb-c");
  EXPECT_EQ((*left)[0].envs.size(), 1u) << "the survivor keeps its envs";
}

TEST(record_pruning, a_store_from_before_pruning_gains_ended_at) {
  test_support::temp_dir d{"guestflow-prune-store"};
  auto file = d.path() / "control-plane.db";
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
    const char* old = R"sql(
      CREATE TABLE guests (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, name TEXT NOT NULL,
        status TEXT NOT NULL, shape TEXT NOT NULL, rootfs TEXT NOT NULL, egress TEXT NOT NULL,
        auto_pause INTEGER, ingress INTEGER NOT NULL, created_at TEXT NOT NULL,
        paused_at TEXT, last_resumed_at TEXT, note TEXT NOT NULL, init_pid INTEGER NOT NULL,
        init_start_time INTEGER NOT NULL, cgroup_dirs TEXT NOT NULL, netns TEXT NOT NULL,
        workspace TEXT NOT NULL, ip TEXT NOT NULL, pooled INTEGER NOT NULL DEFAULT 0);
      INSERT INTO guests VALUES ('sb-old', 1, 'old', 'destroyed', 's-1vcpu-256mb',
        'debian:12', '240.0.0.0/4', NULL, 0, '2026-12-01T00:00:00.000Z', NULL, NULL, '', 42,
        7, '', '', '', '', 0);)sql";
    ASSERT_EQ(sqlite3_exec(db, old, nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db);
    sqlite3_close(db);
  }
  auto store = record_store::open(file);
  ASSERT_TRUE(store) << store.error().message;
  auto all = (*store)->load_all();
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].ended_at, 0) << "unknown: the control plane stamps it at start";
}

} // namespace
} // namespace guestflow::local
