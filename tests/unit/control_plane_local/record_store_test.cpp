#include "controlplane/local/store/record_store.hpp"
#include "tests/support/temp_dir.hpp"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

/// What another process gets from the database (the sqlite3 CLI, a script): a child opens it
/// and tries a read and a write. Exit code: bit 0 the read answered, bit 1 the write did,
/// bit 2 the write was refused busy, bit 3 the read was refused busy; 64 the open failed.
int other_process_on(const std::filesystem::path& file) {
  pid_t pid = ::fork();
  if (pid == 0) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      ::_exit(64);
    sqlite3_busy_timeout(db, 200);
    int code = 0;
    int rc = sqlite3_exec(db, "SELECT count(*) FROM guests", nullptr, nullptr, nullptr);
    code |= rc == SQLITE_OK ? 1 : rc == SQLITE_BUSY ? 8 : 0;
    rc = sqlite3_exec(db, "UPDATE guests SET note = 'intruder'", nullptr, nullptr, nullptr);
    code |= rc == SQLITE_OK ? 2 : rc == SQLITE_BUSY ? 4 : 0;
    sqlite3_close(db);
    ::_exit(code);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// The store holds its database exclusively while open (locking_mode EXCLUSIVE: no POSIX
// lock traffic a commit, no -shm): another process can neither read nor change the records
// meanwhile (busy, not a corrupt or half-read store), and reads them once it has closed.
TEST(local_record_store, another_process_is_kept_out_while_the_store_is_open) {
  test_support::temp_dir s{"guestflow-store"};
  auto file = s.path() / "control-plane.db";
  guest_record r;
  r.id = "sb-00000000000000e1";
  r.name = "mine";
  r.status = sandbox_status::running;
  r.note = "kept";
  r.seq = 1;
  {
    auto store = record_store::open(file);
    ASSERT_TRUE(store) << store.error().message;
    ASSERT_TRUE((*store)->put(r));
    EXPECT_EQ(other_process_on(file), 8 | 4) << "read and write both refused busy";
    struct stat st {};
    EXPECT_NE(::stat((file.string() + "-shm").c_str(), &st), 0) << "no shared WAL index";
    r.status = sandbox_status::destroyed; // the store still writes after the refusals
    ASSERT_TRUE((*store)->put(r));
    auto all = (*store)->load_all();
    ASSERT_TRUE(all);
    ASSERT_EQ(all->size(), 1u);
    EXPECT_EQ(all->front().note, "kept");
  }
  EXPECT_EQ(other_process_on(file), 1 | 2) << "closed: the file is anyone's again";
  auto store = record_store::open(file);
  ASSERT_TRUE(store) << store.error().message;
  auto all = (*store)->load_all();
  ASSERT_TRUE(all);
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().status, sandbox_status::destroyed);
  EXPECT_EQ(all->front().note, "intruder") << "the write made after the close";
}

} // namespace
} // namespace guestflow::local
