#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/store/guest_record.hpp"
#include "controlplane/local/store/record_store.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace guestflow::local {

/// What a start-up reconcile did, for the log.
struct reconcile_report {
  std::vector<guest_record> records; ///< the store's contents afterwards (pool guests aside)
  std::vector<guest_record> pooled;  ///< warm-pool guests still alive, for the pool to adopt
  size_t adopted = 0;                ///< running or paused guests taken over again
  size_t reaped = 0;                 ///< live records whose init was gone → failed
  std::vector<std::string> problems; ///< leftovers that could not be removed
  size_t stray_cgroups = 0;          ///< guests whose cgroup directories no record named
  size_t stray_gvisor_state = 0;     ///< gVisor guests' runsc state no record named
};

/// How old an empty guest cgroup directory no record names must be before a start removes
/// it: control planes share the `guestflow` parent, and another one's create makes its
/// guest's directories a few milliseconds before its first process joins them.
inline constexpr std::chrono::seconds stray_cgroup_grace{10};

/// Brings the records in line with the host after a (re)start. Guests are not the
/// server's children, so they outlive it; here each live record is checked:
/// - init still running (pid and start time) → adopted as is; paused stays paused;
///   a guest caught mid-pause/resume is driven to paused/running;
/// - init gone, or the record was mid-create → `failed`, leftovers removed;
/// - mid-destroy → destroyed again (idempotent), then `destroyed`.
/// Persistent guests (guest_record::persistent) are never `failed` for dead processes:
/// stopped stays stopped; init gone, or caught stopping or starting without a live init →
/// `stopped`, leftovers removed but the workspace kept; starting with a live init → running.
/// Warm-pool guests (guest_record::pooled) were never anyone's: alive and running → handed
/// to the pool (`pooled`); anything else → leftovers removed and the record erased (kept,
/// still pooled and hidden, when the removal failed: the next start tries again).
/// Last, guest cgroup directories (`sb-` and 16 hex digits, under the `guestflow` parent)
/// that no live record names, hold no process and are older than stray_cgroup_grace are
/// removed: a crash can leave an empty set behind (a create or destroy cut short), and no
/// record would ever remove it. A directory with a process in it is never touched (another
/// control plane's guest); rmdir refuses one that gained a process meanwhile.
result<reconcile_report> reconcile(record_store& store, guest_backend& backend);

} // namespace guestflow::local
