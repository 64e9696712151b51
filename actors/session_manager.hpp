#pragma once

#include "actors/actors.hpp"
#include "actors/sandbox_policy.hpp"
#include "actors/session_pool.hpp"
#include "actors/session_task.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace guestflow {

struct session_manager_options {
  std::string owner; ///< names::owner_id of the runtime (session guest names)
  session_pool_options pool;
  /// GUESTFLOW_SESSION_MOUNT_ROOTS (colon-separated, each resolved to its real path): the
  /// host directories a session's `mounts` and `thread_dir` may name.
  std::vector<std::string> mount_roots;
  /// GUESTFLOW_SESSION_SKILLS_DIR: bound read-only at /mnt/skills ("": an empty one).
  std::string skills_dir;
  session_task_options task;
  policy::sandbox_settings settings; ///< the guest's shape and memory (LANGFLOW_SANDBOX_*)
  /// GUESTFLOW_SESSION_MAX_MEMORY_MIB: the most memory a session's `memory_mib` / `cpus`
  /// may get (its shape's); none: any shape of the catalog.
  std::optional<uint64_t> max_memory_mib;
  policy::provider_info provider;
  shape_list catalog;
  std::chrono::seconds call_timeout{120}; ///< a create or delete
};

struct session_manager_state {
  static inline const char* name = "session_manager";
  controlplane_actor cp;
  reaper_actor reaper;
  session_manager_options opts;
  session_pool pool{{}};
  /// Acquires parked behind a create or delete of their name, asked again when it ends.
  std::map<std::string,
           std::vector<std::pair<session_request, caf::typed_response_promise<session_info>>>>
      waiting;
  std::map<caf::actor_addr, session_task_actor> commands; ///< running command tasks
  std::set<std::string> releasing; ///< sessions whose outputs are being copied back
  bool stopping = false;           ///< drained: commands refused with unavailable
};

/// GUESTFLOW_SESSION_REPLICAS (1..1000, default 3), GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS
/// (0..604800, default 600; a session's idle_timeout_seconds replaces it),
/// GUESTFLOW_SESSION_MAX_MEMORY_MIB (1..1048576, default none),
/// GUESTFLOW_SESSION_RETENTION_SECONDS (0..315360000, default 14 days),
/// GUESTFLOW_SESSION_MOUNT_ROOTS, GUESTFLOW_SESSION_SKILLS_DIR (an existing
/// directory), GUESTFLOW_SESSION_SYNC_CAP_BYTES (default 100 MiB),
/// GUESTFLOW_DOWNLOAD_CAP_BYTES (default 100 MiB) and GUESTFLOW_DOWNLOAD_PREFIX (absolute,
/// default /mnt/user-data); bad_request naming a malformed one. The rest of the options is
/// the caller's to fill in.
result<session_manager_options> session_options_from_env(const policy::env_map& env);

/// The sessions of `guestflow serve` (see actors.hpp): the pool decides, this actor does the
/// control-plane calls. On a local control plane a session guest is persistent: eviction
/// and the idle timeout stop it (its /mnt/user-data and /mnt/acp-workspace are directories
/// of its workspace volume), the next acquire wakes it. CreateOS has no such guests: there
/// a session guest is ephemeral, tracked by the reaper and deleted where a local one stops.
session_manager_actor::behavior_type
session_manager(session_manager_actor::stateful_pointer<session_manager_state> self,
                controlplane_actor cp, reaper_actor reaper, session_manager_options opts);

} // namespace guestflow
