#pragma once

#include "messages/component.hpp"
#include "messages/error.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"
#include "messages/shared_bytes.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// A file placed in the guest before the command runs.
struct upload {
  std::string path;     ///< absolute guest path
  shared_bytes content; ///< shared, never copied: the runner is every flow run's
  friend bool operator==(const upload& a, const upload& b) {
    return a.path == b.path && a.content == b.content;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, upload& x) {
  return f(x.path, x.content);
}

/// Everything one execution actor needs to own one guest's lifecycle end to end.
struct execution_spec {
  std::string name;              ///< guest name, known (and tracked) before create
  sandbox_create_request create; ///< `create.name == name`
  std::vector<upload> uploads;
  exec_request command;          ///< already wrapped in `timeout --signal=KILL N`
  uint32_t timeout_seconds = 30; ///< the guest's own wall clock (timeout(1))
  bool stream = false;           ///< streamed exec: lines go to the execution's sink
  friend bool operator==(const execution_spec& a, const execution_spec& b) {
    return a.name == b.name && a.create == b.create && a.uploads == b.uploads &&
           a.command == b.command && a.timeout_seconds == b.timeout_seconds &&
           a.stream == b.stream;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, execution_spec& x) {
  return f(x.name, x.create, x.uploads, x.command, x.timeout_seconds, x.stream);
}

/// How a finished execution ended. `outcome` classifies the guest exit: nothing for a
/// normal exit, `timeout` (exit mapped to -1) or `oom` (exit 137).
struct execution_report {
  std::string guest_id;
  std::string name;
  exec_result result;
  std::optional<ec> outcome;
  uint64_t total_ms = 0; ///< requested → deleted
  /// Set when the execution was asked to return /workspace/artifacts (component surface).
  std::optional<returned_files> files;
  /// Reusable guests: the registry adopted an earlier run's guest instead of creating one.
  bool reused = false;
  friend bool operator==(const execution_report& a, const execution_report& b) {
    return a.guest_id == b.guest_id && a.name == b.name && a.result == b.result &&
           a.outcome == b.outcome && a.total_ms == b.total_ms && a.files == b.files &&
           a.reused == b.reused;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, execution_report& x) {
  return f(x.guest_id, x.name, x.result, x.outcome, x.total_ms, x.files, x.reused);
}

/// The sandbox-backend answer (lfx's SandboxResult, plus `truncated`) of a finished run.
inline sandbox_result sandbox_result_of(const execution_report& r) {
  sandbox_result out;
  out.stdout_text = r.result.stdout_text;
  out.stderr_text = r.result.stderr_text;
  out.exit_code = r.result.exit_code;
  out.execution_time_ms = r.result.exec_ms;
  out.truncated = r.result.truncated;
  return out;
}

/// Guaranteed-deletion bookkeeping (the reaper's counters).
struct reaper_stats {
  uint64_t tracked = 0;        ///< names currently owned by a live execution
  uint64_t created = 0;        ///< creates reported
  uint64_t deleted = 0;        ///< confirmed deletes (by owners or by the reaper)
  uint64_t pending = 0;        ///< deletes the reaper still owes
  uint64_t failed_deletes = 0; ///< delete attempts that failed (each retried)
  friend bool operator==(const reaper_stats& a, const reaper_stats& b) {
    return a.tracked == b.tracked && a.created == b.created && a.deleted == b.deleted &&
           a.pending == b.pending && a.failed_deletes == b.failed_deletes;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, reaper_stats& x) {
  return f(x.tracked, x.created, x.deleted, x.pending, x.failed_deletes);
}

} // namespace guestflow
