#include "controlplane/local/store/record_store.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

namespace guestflow::local {
namespace {

TEST(local_record_store, round_trips_a_stopped_persistent_guest) {
  test_support::temp_dir s{"guestflow-store"};
  auto file = s.path() / "control-plane.db";
  guest_record r;
  r.id = "sb-00000000000000aa";
  r.name = "gf-c-keep";
  r.status = sandbox_status::stopped;
  r.shape = "s-1vcpu-256mb";
  r.rootfs = "debian:12";
  r.created_at = "2026-11-30T09:00:00.000Z";
  r.runtime.id = r.id;
  r.runtime.workspace = "/state/guests/sb-00000000000000aa/workspace";
  r.persistent = true;
  r.idle_ttl_seconds = 90;
  r.delete_after_stop_seconds = 1209600;
  r.stopped_at = "2026-11-30T09:05:00.000Z";
  r.stopped_unix = 1796029500;
  r.last_used_at = "2026-11-30T09:03:00.000Z";
  r.last_used_unix = 1796029380;
  {
    auto store = record_store::open(file);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->put(r));
  }
  auto store = record_store::open(file); // reopening adds no column twice
  ASSERT_TRUE(store) << store.error().message;
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  const auto& b = all->front();
  EXPECT_EQ(b.status, sandbox_status::stopped);
  EXPECT_TRUE(b.persistent);
  EXPECT_EQ(b.idle_ttl_seconds, 90u);
  EXPECT_EQ(b.delete_after_stop_seconds, 1209600u);
  EXPECT_EQ(b.stopped_at, r.stopped_at);
  EXPECT_EQ(b.stopped_unix, r.stopped_unix);
  EXPECT_EQ(b.last_used_at, r.last_used_at);
  EXPECT_EQ(b.last_used_unix, r.last_used_unix);
  EXPECT_EQ(b.runtime.workspace, r.runtime.workspace);
  auto v = to_view(b);
  EXPECT_TRUE(v.persistent);
  EXPECT_EQ(v.idle_ttl_seconds, 90u);
  EXPECT_EQ(v.stopped_at, r.stopped_at);
}

TEST(local_record_store, round_trips_records_across_reopen) {
  test_support::temp_dir s{"guestflow-store"};
  auto file = s.path() / "control-plane.db";
  guest_record r;
  r.id = "sb-0123456789abcdef";
  r.name = "keeper";
  r.status = sandbox_status::paused;
  r.shape = "s-1vcpu-256mb";
  r.rootfs = "debian:12";
  r.egress = *parse_egress({"10.0.0.0/8:443", "1.2.3.4"});
  r.envs = {{"A", "1"}, {"SECRET", "x=y\nz"}};
  r.auto_pause_after_seconds = 600;
  r.created_at = "2026-11-30T09:00:00.000Z";
  r.paused_at = "2026-11-30T09:01:00.000Z";
  r.note = "out of memory (memory limit 64 MiB)";
  r.runtime.id = r.id;
  r.runtime.init_pid = 4242;
  r.runtime.init_start_time = 987654321;
  r.runtime.cgroup_dirs = {"/sys/fs/cgroup/memory/guestflow/sb-0123", "/sys/fs/cgroup/pids/x"};
  r.runtime.netns = "gf-sb-0123";
  r.runtime.workspace = "/state/guests/sb-0123";
  r.runtime.ip = "10.200.0.2";
  r.seq = 7;
  {
    auto store = record_store::open(file);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->put(r));
    r.status = sandbox_status::running; // a second put replaces
    ASSERT_TRUE((*store)->put(r));
  }
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the records hold env values";
  auto store = record_store::open(file);
  ASSERT_TRUE(store);
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  const auto& b = all->front();
  EXPECT_EQ(b.status, sandbox_status::running);
  EXPECT_EQ(b.name, r.name);
  EXPECT_EQ(b.egress, r.egress);
  EXPECT_EQ(b.envs, r.envs);
  EXPECT_EQ(b.auto_pause_after_seconds, r.auto_pause_after_seconds);
  EXPECT_EQ(b.paused_at, r.paused_at);
  EXPECT_FALSE(b.last_resumed_at);
  EXPECT_EQ(b.note, r.note);
  EXPECT_EQ(b.runtime.init_pid, r.runtime.init_pid);
  EXPECT_EQ(b.runtime.init_start_time, r.runtime.init_start_time);
  EXPECT_EQ(b.runtime.cgroup_dirs, r.runtime.cgroup_dirs);
  EXPECT_EQ(b.runtime.workspace, r.runtime.workspace);
  EXPECT_EQ((*store)->next_seq(), 8);
  ASSERT_TRUE((*store)->erase(r.id));
  EXPECT_TRUE((*store)->load_all()->empty());
}

// put() keeps its statements prepared: each use starts unbound, so what one put set (a
// pause time, an env) does not leak into the next put of another record or the same one.
TEST(local_record_store, reused_statements_start_clean_for_each_put) {
  test_support::temp_dir s{"guestflow-store"};
  auto store = record_store::open(s.path() / "control-plane.db");
  ASSERT_TRUE(store) << store.error().message;
  guest_record a;
  a.id = "sb-00000000000000a1";
  a.name = "first";
  a.status = sandbox_status::paused;
  a.paused_at = "2026-12-07T05:00:00.000Z";
  a.auto_pause_after_seconds = 30;
  a.envs = {{"A", "1"}, {"B", "2"}};
  a.seq = 1;
  ASSERT_TRUE((*store)->put(a));
  guest_record b;
  b.id = "sb-00000000000000b2";
  b.name = "second";
  b.status = sandbox_status::creating;
  b.seq = 2;
  ASSERT_TRUE((*store)->put(b));
  a.status = sandbox_status::running;
  a.paused_at.reset();
  a.auto_pause_after_seconds.reset();
  a.envs = {{"B", "3"}};
  ASSERT_TRUE((*store)->put(a)); // replaced: its envs too
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].id, a.id);
  EXPECT_EQ((*all)[0].status, sandbox_status::running);
  EXPECT_FALSE((*all)[0].paused_at);
  EXPECT_FALSE((*all)[0].auto_pause_after_seconds);
  EXPECT_EQ((*all)[0].envs, a.envs);
  EXPECT_EQ((*all)[1].id, b.id);
  EXPECT_FALSE((*all)[1].paused_at);
  EXPECT_FALSE((*all)[1].auto_pause_after_seconds);
  EXPECT_TRUE((*all)[1].envs.empty());
  ASSERT_TRUE((*store)->erase_all({a.id, b.id}));
  EXPECT_TRUE((*store)->load_all()->empty());
}

// A put of a stored record updates its row in place and leaves unchanged envs alone: one
// WAL frame (a page and its header) a put, where a replace wrote the table's and the key
// index's pages and rewrote the envs' (four frames). Envs that did change are rewritten.
TEST(local_record_store, a_put_of_a_stored_record_writes_one_page) {
  test_support::temp_dir s{"guestflow-store"};
  auto file = s.path() / "control-plane.db";
  auto store = record_store::open(file);
  ASSERT_TRUE(store) << store.error().message;
  guest_record r;
  r.id = "sb-00000000000000c3";
  r.name = "pooled";
  r.status = sandbox_status::creating;
  r.envs = {{"A", "1"}, {"B", "2"}};
  r.seq = 1;
  ASSERT_TRUE((*store)->put(r));
  auto wal_size = [&] {
    struct stat st {};
    EXPECT_EQ(::stat((file.string() + "-wal").c_str(), &st), 0);
    return st.st_size;
  };
  const auto before = wal_size();
  r.status = sandbox_status::running;
  r.note = "taken";
  ASSERT_TRUE((*store)->put(r));
  EXPECT_EQ(wal_size() - before, 4096 + 24) << "one frame: the guest's row, in place";
  r.envs = {{"A", "1"}}; // B goes
  ASSERT_TRUE((*store)->put(r));
  r.status = sandbox_status::destroyed;
  ASSERT_TRUE((*store)->put(r));
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().status, sandbox_status::destroyed);
  EXPECT_EQ(all->front().note, "taken");
  EXPECT_EQ(all->front().envs, r.envs);
  r.envs = {{"A", "1"}, {"C", "3"}}; // one more
  ASSERT_TRUE((*store)->put(r));
  EXPECT_EQ((*store)->load_all()->front().envs, r.envs);
}

} // namespace
} // namespace guestflow::local
