#include "controlplane/local/store/record_store.hpp"

#include "controlplane/local/guests/guest_mounts.hpp"

#include <cstring>
#include <fcntl.h>
#include <sqlite3.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

constexpr const char* schema = R"sql(
CREATE TABLE IF NOT EXISTS guests (
  id TEXT PRIMARY KEY,
  seq INTEGER NOT NULL,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  shape TEXT NOT NULL,
  rootfs TEXT NOT NULL,
  egress TEXT NOT NULL,          -- canonical rules, one per line ("*" = allow all)
  auto_pause INTEGER,            -- NULL: never
  ingress INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  paused_at TEXT,
  last_resumed_at TEXT,
  note TEXT NOT NULL,
  init_pid INTEGER NOT NULL,
  init_start_time INTEGER NOT NULL,
  cgroup_dirs TEXT NOT NULL,     -- one directory per line
  netns TEXT NOT NULL,
  workspace TEXT NOT NULL,
  ip TEXT NOT NULL,
  pooled INTEGER NOT NULL DEFAULT 0, -- a warm-pool guest (guest_record::pooled)
  ended_at INTEGER NOT NULL DEFAULT 0 -- Unix seconds it became destroyed/failed; 0: not
);
CREATE TABLE IF NOT EXISTS guest_envs (
  guest_id TEXT NOT NULL REFERENCES guests(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (guest_id, key)
);
)sql";

failure db_failure(sqlite3* db, const char* what) {
  return fail(ec::unavailable,
              std::string{"record store: "} + what + ": " + sqlite3_errmsg(db));
}

/// Binds a statement's parameters and reads its columns.
struct statement_ref {
  sqlite3_stmt* s = nullptr;
  explicit operator bool() const { return s != nullptr; }
  void text(int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void opt_text(int i, const std::optional<std::string>& v) {
    if (v)
      text(i, *v);
    else
      sqlite3_bind_null(s, i);
  }
  void integer(int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
  std::string col_text(int i) {
    auto p = sqlite3_column_text(s, i);
    return p ? std::string{reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(s, i))}
             : std::string{};
  }
  std::optional<std::string> col_opt_text(int i) {
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return std::nullopt;
    return col_text(i);
  }
};

/// Prepared statement that finalizes itself.
struct stmt : statement_ref {
  stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &s, nullptr); }
  ~stmt() { sqlite3_finalize(s); }
  stmt(const stmt&) = delete;
  stmt& operator=(const stmt&) = delete;
};

/// One use of a statement the store keeps prepared: reset and unbound afterwards, whatever
/// the step returned, so that the next use starts clean.
struct reused : statement_ref {
  explicit reused(sqlite3_stmt* p) { s = p; }
  ~reused() {
    if (!s) return;
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
  reused(const reused&) = delete;
  reused& operator=(const reused&) = delete;
};

std::string join_lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& x : v) {
    if (!out.empty()) out.push_back('\n');
    out += x;
  }
  return out;
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in{s};
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

} // namespace

result<std::unique_ptr<record_store>> record_store::open(const std::filesystem::path& file) {
  // Create the file 0600 ourselves: it holds env values. SQLite gives -wal/-shm the same mode.
  int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    return fail(ec::unavailable, "cannot open " + file.string() + ": " + std::strerror(errno));
  ::fchmod(fd, 0600);
  ::close(fd);
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    auto f = db_failure(db, "open");
    sqlite3_close(db);
    return f;
  }
  std::unique_ptr<record_store> store{new record_store(db)};
  sqlite3_busy_timeout(db, 5000);
  // EXCLUSIVE before the first WAL access: the control plane is the database's only user
  // (its state dir's lock says so; the soak reads it after the stop), so no transaction
  // takes and drops POSIX locks on the -shm (six fcntl a commit, ~29 a pooled run) and the
  // WAL index lives in the heap, no -shm. Another process gets SQLITE_BUSY, never a write.
  for (const char* sql : {"PRAGMA locking_mode=EXCLUSIVE", "PRAGMA journal_mode=WAL",
                          "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON", schema})
    if (auto r = store->exec(sql); !r) return r.error();
  if (auto r = store->add_column("pooled", "INTEGER NOT NULL DEFAULT 0"); !r) return r.error();
  if (auto r = store->add_column("ended_at", "INTEGER NOT NULL DEFAULT 0"); !r)
    return r.error();
  // Persistent guests (stop / start with a kept workspace).
  for (const char* c :
       {"persistent", "idle_ttl", "delete_after_stop", "stopped_unix", "last_used_unix"})
    if (auto r = store->add_column(c, "INTEGER NOT NULL DEFAULT 0"); !r) return r.error();
  for (const char* c : {"stopped_at", "last_used_at"})
    if (auto r = store->add_column(c, "TEXT"); !r) return r.error();
  if (auto r = store->add_column("mounts", "TEXT NOT NULL DEFAULT ''"); !r) return r.error();
  if (auto r = store->add_column("ingress_secret", "TEXT NOT NULL DEFAULT ''"); !r)
    return r.error();
  // '' = namespaces (every guest made before gVisor guests existed).
  if (auto r = store->add_column("isolation", "TEXT NOT NULL DEFAULT ''"); !r) return r.error();
  // gVisor: how the guest last started, and why its checkpoint or snapshot was not restored.
  if (auto r = store->add_column("started_from", "TEXT NOT NULL DEFAULT ''"); !r)
    return r.error();
  if (auto r = store->add_column("restore_error", "TEXT"); !r) return r.error();
  return store;
}

result<bool> record_store::add_column(const char* name, const char* definition) {
  stmt s{db_, "SELECT 1 FROM pragma_table_info('guests') WHERE name = ?"};
  if (!s) return db_failure(db_, "prepare");
  s.text(1, name);
  auto rc = sqlite3_step(s.s);
  if (rc == SQLITE_ROW) return true;
  if (rc != SQLITE_DONE) return db_failure(db_, "read the schema");
  auto sql = std::string{"ALTER TABLE guests ADD COLUMN "} + name + " " + definition;
  return exec(sql.c_str());
}

record_store::~record_store() {
  for (auto* p : {&begin_, &commit_, &rollback_, &insert_guest_, &clear_envs_, &insert_env_,
                  &select_envs_})
    sqlite3_finalize(*p); // sqlite3_close refuses a connection with live statements
  sqlite3_close(db_);
}

sqlite3_stmt* record_store::prepared(sqlite3_stmt*& slot, const char* sql) {
  if (!slot) sqlite3_prepare_v2(db_, sql, -1, &slot, nullptr);
  return slot;
}

result<bool> record_store::step(sqlite3_stmt*& slot, const char* sql, const char* what) {
  reused s{prepared(slot, sql)};
  if (!s) return db_failure(db_, "prepare");
  if (sqlite3_step(s.s) != SQLITE_DONE) return db_failure(db_, what);
  return true;
}

result<bool> record_store::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return fail(ec::unavailable, "record store: " + msg);
  }
  return true;
}

result<bool> record_store::put(const guest_record& r) {
  // Every statement here is prepared once per store: preparing them, the 31-column insert
  // most, cost about half of a put's CPU (bench/README.md, the control plane's section).
  if (auto t = step(begin_, "BEGIN IMMEDIATE", "begin"); !t) return t;
  auto rollback = [&](failure f) -> result<bool> {
    step(rollback_, "ROLLBACK", "rollback");
    return f;
  };
  {
    reused s{prepared(
        insert_guest_,
        "INSERT INTO guests (id, seq, name, status, shape, rootfs, egress, "
        "auto_pause, ingress, created_at, paused_at, last_resumed_at, note, init_pid, "
        "init_start_time, cgroup_dirs, netns, workspace, ip, pooled, ended_at, persistent, "
        "idle_ttl, delete_after_stop, stopped_at, stopped_unix, last_used_at, "
        "last_used_unix, mounts, ingress_secret, isolation, started_from, restore_error) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
        "ON CONFLICT(id) DO UPDATE SET "
        "seq=excluded.seq, name=excluded.name, status=excluded.status, "
        "shape=excluded.shape, rootfs=excluded.rootfs, egress=excluded.egress, "
        "auto_pause=excluded.auto_pause, ingress=excluded.ingress, "
        "created_at=excluded.created_at, paused_at=excluded.paused_at, "
        "last_resumed_at=excluded.last_resumed_at, note=excluded.note, "
        "init_pid=excluded.init_pid, init_start_time=excluded.init_start_time, "
        "cgroup_dirs=excluded.cgroup_dirs, netns=excluded.netns, "
        "workspace=excluded.workspace, ip=excluded.ip, pooled=excluded.pooled, "
        "ended_at=excluded.ended_at, persistent=excluded.persistent, "
        "idle_ttl=excluded.idle_ttl, "
        "delete_after_stop=excluded.delete_after_stop, "
        "stopped_at=excluded.stopped_at, stopped_unix=excluded.stopped_unix, "
        "last_used_at=excluded.last_used_at, "
        "last_used_unix=excluded.last_used_unix, mounts=excluded.mounts, "
        "ingress_secret=excluded.ingress_secret, isolation=excluded.isolation, "
        "started_from=excluded.started_from, "
        "restore_error=excluded.restore_error")};
    if (!s) return rollback(db_failure(db_, "prepare"));
    s.text(1, r.id);
    s.integer(2, r.seq);
    s.text(3, r.name);
    s.text(4, std::string{to_string(r.status)});
    s.text(5, r.shape);
    s.text(6, r.rootfs);
    s.text(7, join_lines(to_strings(r.egress)));
    if (r.auto_pause_after_seconds)
      s.integer(8, *r.auto_pause_after_seconds);
    else
      sqlite3_bind_null(s.s, 8);
    s.integer(9, r.ingress_enabled ? 1 : 0);
    s.text(10, r.created_at);
    s.opt_text(11, r.paused_at);
    s.opt_text(12, r.last_resumed_at);
    s.text(13, r.note);
    s.integer(14, r.runtime.init_pid);
    s.integer(15, static_cast<int64_t>(r.runtime.init_start_time));
    s.text(16, join_lines(r.runtime.cgroup_dirs));
    s.text(17, r.runtime.netns);
    s.text(18, r.runtime.workspace.string());
    s.text(19, r.runtime.ip);
    s.integer(20, r.pooled ? 1 : 0);
    s.integer(21, r.ended_at);
    s.integer(22, r.persistent ? 1 : 0);
    s.integer(23, r.idle_ttl_seconds);
    s.integer(24, r.delete_after_stop_seconds);
    s.opt_text(25, r.stopped_at);
    s.integer(26, r.stopped_unix);
    s.opt_text(27, r.last_used_at);
    s.integer(28, r.last_used_unix);
    s.text(29, mounts_to_text(r.mounts));
    s.text(30, r.ingress_secret);
    s.text(31, r.runtime.isolation == guest_isolation::gvisor ? "gvisor" : "");
    s.text(32, r.started_from);
    s.opt_text(33, r.restore_error);
    if (sqlite3_step(s.s) != SQLITE_DONE) return rollback(db_failure(db_, "insert guest"));
  }
  if (auto same = envs_stored(r.id, r.envs); !same) {
    return rollback(same.error());
  } else if (*same) {
    if (auto c = step(commit_, "COMMIT", "commit"); !c) return rollback(c.error());
    return true;
  }
  {
    reused del{prepared(clear_envs_, "DELETE FROM guest_envs WHERE guest_id = ?")};
    if (!del) return rollback(db_failure(db_, "prepare"));
    del.text(1, r.id);
    if (sqlite3_step(del.s) != SQLITE_DONE) return rollback(db_failure(db_, "clear envs"));
  }
  for (const auto& [k, v] : r.envs) {
    reused s{
        prepared(insert_env_, "INSERT INTO guest_envs (guest_id, key, value) VALUES (?,?,?)")};
    if (!s) return rollback(db_failure(db_, "prepare"));
    s.text(1, r.id);
    s.text(2, k);
    s.text(3, v);
    if (sqlite3_step(s.s) != SQLITE_DONE) return rollback(db_failure(db_, "insert env"));
  }
  if (auto c = step(commit_, "COMMIT", "commit"); !c) return rollback(c.error());
  return true;
}

result<bool> record_store::envs_stored(const std::string& id,
                                       const std::map<std::string, std::string>& envs) {
  reused s{prepared(select_envs_,
                    "SELECT key, value FROM guest_envs WHERE guest_id = ? ORDER BY key")};
  if (!s) return db_failure(db_, "prepare");
  s.text(1, id);
  auto want = envs.begin();
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    if (want == envs.end() || s.col_text(0) != want->first || s.col_text(1) != want->second)
      return false;
    ++want;
  }
  if (rc != SQLITE_DONE) return db_failure(db_, "read envs");
  return want == envs.end();
}

result<bool> record_store::erase(const std::string& id) {
  stmt s{db_, "DELETE FROM guests WHERE id = ?"};
  s.text(1, id);
  if (sqlite3_step(s.s) != SQLITE_DONE) return db_failure(db_, "delete guest");
  return true;
}

result<bool> record_store::erase_all(const std::vector<std::string>& ids) {
  if (auto t = exec("BEGIN IMMEDIATE"); !t) return t;
  for (const auto& id : ids) {
    stmt s{db_, "DELETE FROM guests WHERE id = ?"};
    s.text(1, id);
    if (sqlite3_step(s.s) != SQLITE_DONE) {
      auto f = db_failure(db_, "delete guest");
      exec("ROLLBACK");
      return f;
    }
  }
  return exec("COMMIT");
}

result<std::vector<guest_record>> record_store::load_all() {
  std::vector<guest_record> out;
  stmt s{db_,
         "SELECT id, seq, name, status, shape, rootfs, egress, auto_pause, ingress, "
         "created_at, paused_at, last_resumed_at, note, init_pid, init_start_time, "
         "cgroup_dirs, netns, workspace, ip, pooled, ended_at, persistent, idle_ttl, "
         "delete_after_stop, stopped_at, stopped_unix, last_used_at, last_used_unix, mounts, "
         "ingress_secret, isolation, started_from, restore_error FROM guests ORDER BY seq"};
  if (!s) return db_failure(db_, "prepare");
  int rc;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    guest_record r;
    r.id = s.col_text(0);
    r.seq = sqlite3_column_int64(s.s, 1);
    r.name = s.col_text(2);
    auto status = sandbox_status_from_string(s.col_text(3));
    if (!status)
      return fail(ec::unavailable, "record store: guest " + r.id + " has unknown status '" +
                                       s.col_text(3) + "'");
    r.status = *status;
    r.shape = s.col_text(4);
    r.rootfs = s.col_text(5);
    auto egress = parse_egress(split_lines(s.col_text(6)));
    if (!egress)
      return fail(ec::unavailable, "record store: guest " + r.id +
                                       " has unreadable egress: " + egress.error().message);
    r.egress = *egress;
    if (sqlite3_column_type(s.s, 7) != SQLITE_NULL)
      r.auto_pause_after_seconds = static_cast<uint32_t>(sqlite3_column_int64(s.s, 7));
    r.ingress_enabled = sqlite3_column_int64(s.s, 8) != 0;
    r.created_at = s.col_text(9);
    r.paused_at = s.col_opt_text(10);
    r.last_resumed_at = s.col_opt_text(11);
    r.note = s.col_text(12);
    r.runtime.id = r.id;
    r.runtime.init_pid = static_cast<pid_t>(sqlite3_column_int64(s.s, 13));
    r.runtime.init_start_time = static_cast<uint64_t>(sqlite3_column_int64(s.s, 14));
    r.runtime.cgroup_dirs = split_lines(s.col_text(15));
    r.runtime.netns = s.col_text(16);
    r.runtime.workspace = s.col_text(17);
    r.runtime.ip = s.col_text(18);
    r.pooled = sqlite3_column_int64(s.s, 19) != 0;
    r.ended_at = sqlite3_column_int64(s.s, 20);
    r.persistent = sqlite3_column_int64(s.s, 21) != 0;
    r.idle_ttl_seconds = static_cast<uint32_t>(sqlite3_column_int64(s.s, 22));
    r.delete_after_stop_seconds = static_cast<uint32_t>(sqlite3_column_int64(s.s, 23));
    r.stopped_at = s.col_opt_text(24);
    r.stopped_unix = sqlite3_column_int64(s.s, 25);
    r.last_used_at = s.col_opt_text(26);
    r.last_used_unix = sqlite3_column_int64(s.s, 27);
    auto mounts = mounts_from_text(s.col_text(28));
    if (!mounts) return mounts.error();
    r.mounts = std::move(*mounts);
    r.ingress_secret = s.col_text(29);
    if (s.col_text(30) == "gvisor") r.runtime.isolation = guest_isolation::gvisor;
    r.started_from = s.col_text(31);
    r.restore_error = s.col_opt_text(32);
    out.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return db_failure(db_, "load guests");
  stmt e{db_, "SELECT guest_id, key, value FROM guest_envs"};
  while ((rc = sqlite3_step(e.s)) == SQLITE_ROW) {
    auto id = e.col_text(0);
    for (auto& r : out)
      if (r.id == id) r.envs.emplace(e.col_text(1), e.col_text(2));
  }
  if (rc != SQLITE_DONE) return db_failure(db_, "load envs");
  return out;
}

int64_t record_store::next_seq() {
  stmt s{db_, "SELECT COALESCE(MAX(seq), 0) + 1 FROM guests"};
  return sqlite3_step(s.s) == SQLITE_ROW ? sqlite3_column_int64(s.s, 0) : 1;
}

} // namespace guestflow::local
