#pragma once

#include "controlplane/local/store/guest_record.hpp"
#include "messages/error.hpp"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace guestflow::local {

/// Guest records in SQLite (WAL, busy_timeout, locking_mode EXCLUSIVE: held from the first
/// access until the store closes) at `state_dir/control-plane.db`, file mode 0600.
/// Write-through: every change is committed before the call returns, so a restart (or a crash)
/// finds what the last answer promised. Not thread-safe; the owner serializes.
class record_store {
public:
  static result<std::unique_ptr<record_store>> open(const std::filesystem::path& file);
  ~record_store();
  record_store(const record_store&) = delete;
  record_store& operator=(const record_store&) = delete;

  /// Inserts or replaces the record (and its envs) in one transaction. A stored record is
  /// updated in place (its row and its key's index entry stay put) and its envs are
  /// rewritten only when they changed: a put dirties one page of the WAL, not four or five.
  result<bool> put(const guest_record& r);

  /// Removes a record that never became a guest (a create that failed).
  result<bool> erase(const std::string& id);

  /// Removes these records (and their envs) in one transaction: pruned ended guests.
  result<bool> erase_all(const std::vector<std::string>& ids);

  /// Every record, in creation order.
  result<std::vector<guest_record>> load_all();

  /// The next creation sequence number (1 + the largest stored).
  int64_t next_seq();

private:
  explicit record_store(sqlite3* db)
      : db_(db) {}
  result<bool> exec(const char* sql);
  /// Stores made before a column existed (`pooled`: the warm pool; `ended_at`: pruning)
  /// get it added, every row with the column's default.
  result<bool> add_column(const char* name, const char* definition);
  /// `slot`'s statement, prepared on first use and kept until the store closes.
  sqlite3_stmt* prepared(sqlite3_stmt*& slot, const char* sql);
  /// Whether the store holds exactly `envs` for `id` already: put() then leaves its rows
  /// alone (rewriting them dirtied two pages of the WAL a put).
  result<bool> envs_stored(const std::string& id,
                           const std::map<std::string, std::string>& envs);
  /// Runs `slot`'s statement (one that returns no rows) once.
  result<bool> step(sqlite3_stmt*& slot, const char* sql, const char* what);
  sqlite3* db_;
  /// put()'s statements (the owner serializes calls, so one of each is enough).
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  sqlite3_stmt* insert_guest_ = nullptr;
  sqlite3_stmt* clear_envs_ = nullptr;
  sqlite3_stmt* insert_env_ = nullptr;
  sqlite3_stmt* select_envs_ = nullptr;
};

} // namespace guestflow::local
