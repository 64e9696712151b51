#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "messages/egress.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace guestflow::local {

/// Everything the control plane knows about one guest; one row of the record store.
/// Env values are kept (exec needs them), which is why the store file is 0600.
struct guest_record {
  std::string id;
  std::string name;
  sandbox_status status = sandbox_status::creating;
  std::string shape; ///< catalog id
  std::string rootfs;
  egress_policy egress;
  std::map<std::string, std::string> envs;
  std::vector<sandbox_mount> mounts; ///< as resolve_mounts() left them (checked at each start)
  std::optional<uint32_t> auto_pause_after_seconds;
  bool ingress_enabled = false;
  /// With ingress_enabled: opens the guest's service URLs (32 random bytes, base64url).
  /// Handed out once, in the create answer; never in a view, a list or a log.
  std::string ingress_secret;
  std::string created_at; ///< RFC 3339 UTC
  std::optional<std::string> paused_at;
  std::optional<std::string> last_resumed_at;
  std::string note;      ///< last notable event, e.g. "out of memory (memory limit 64 MiB)"
  guest_runtime runtime; ///< empty init_pid until the backend built the guest
  int64_t seq = 0;       ///< creation order (list order)
  /// A warm-pool guest no one has used: never listed, never found by id, never reachable by
  /// exec or files; the pool (service/warm_pool.hpp) owns it until a create takes it.
  bool pooled = false;
  /// When it became destroyed or failed (Unix seconds); 0 while it is not. Its record is
  /// pruned a retention after that (control_plane_config::destroyed_retention).
  int64_t ended_at = 0;
  /// Can be stopped (processes gone, workspace kept) and started again; survives the death
  /// of its processes (a host reboot) as `stopped` instead of `failed`.
  bool persistent = false;
  uint32_t idle_ttl_seconds = 0; ///< persistent: stopped when idle this long; 0: never
  uint32_t delete_after_stop_seconds =
      0; ///< persistent: deleted when stopped this long; 0: never
  std::optional<std::string> stopped_at; ///< RFC 3339, while stopped
  int64_t stopped_unix = 0; ///< the same in Unix seconds (retention), 0: not stopped
  std::optional<std::string> last_used_at; ///< RFC 3339: an exec or file call began or ended
  int64_t last_used_unix = 0;              ///< the same in Unix seconds (idle TTL, reap)
  /// gVisor (sandbox_view::started_from, restore_error), persisted: how the guest last
  /// started, and why its checkpoint or snapshot could not be restored.
  std::string started_from;
  std::optional<std::string> restore_error;
};

/// States in which a guest may still own processes, cgroups or a name.
inline bool is_live(sandbox_status s) {
  return s != sandbox_status::destroyed && s != sandbox_status::failed &&
         s != sandbox_status::error;
}

/// Wire view of a record (env names only, never values).
sandbox_view to_view(const guest_record& r);

} // namespace guestflow::local

namespace guestflow::local {

struct list_query;

/// One page of `records` (creation order) matching `q`, with the total before paging.
sandbox_list list_page(const std::vector<const guest_record*>& records, const list_query& q);

/// `GET /v1/whoami` counts over every guest that is not destroyed.
whoami count_guests(const std::vector<const guest_record*>& records);

} // namespace guestflow::local
