#pragma once

#include "controlplane/local/store/guest_record.hpp"
#include "messages/error.hpp"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

struct sqlite3;

namespace guestflow::local {

/// Guest records in SQLite (WAL, busy_timeout) at `state_dir/control-plane.db`, file mode
/// 0600. Write-through: every change is committed before the call returns, so a restart
/// (or a crash) finds what the last answer promised. Not thread-safe; the owner serializes.
class record_store {
public:
  static result<std::unique_ptr<record_store>> open(const std::filesystem::path& file);
  ~record_store();
  record_store(const record_store&) = delete;
  record_store& operator=(const record_store&) = delete;

  /// Inserts or replaces the record (and its envs) in one transaction.
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
  sqlite3* db_;
};

} // namespace guestflow::local
