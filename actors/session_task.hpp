#pragma once

#include "actors/actors.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

struct session_task_options {
  uint64_t download_cap_bytes = uint64_t{100} << 20; ///< GUESTFLOW_DOWNLOAD_CAP_BYTES
  std::string download_prefix = "/mnt/user-data";    ///< GUESTFLOW_DOWNLOAD_PREFIX
  std::chrono::seconds call_timeout{120};            ///< a file call's exec, upload or fetch
  /// A thread directory's sync, each way (DeerFlow's remote providers' bounds,
  /// community/sandbox0/transfer.py): at most this many files…
  uint64_t sync_max_files = 2000;
  /// …of at most this many bytes together (GUESTFLOW_SESSION_SYNC_CAP_BYTES).
  uint64_t sync_max_bytes = uint64_t{100} << 20;
};

/// Where DeerFlow's thread directories meet the guest: `<thread_dir>/uploads` goes to
/// `/mnt/user-data/uploads` on acquire, `/mnt/user-data/outputs` to `<thread_dir>/outputs`
/// on release.
inline constexpr const char* guest_uploads_dir = "/mnt/user-data/uploads";
inline constexpr const char* guest_outputs_dir = "/mnt/user-data/outputs";

/// A regular file below a host directory: its path relative to it (bytes) and size.
struct host_file {
  std::string rel;
  uint64_t size = 0;
};

/// The regular files below `dir` (absolute, no symlink in it), never following a symlink
/// (links and other non-regular entries are skipped, as DeerFlow's providers skip them, and
/// so are its `.upload-*` partial files); a missing `dir` has none. artifact_too_large past
/// the file count or byte cap.
result<std::vector<host_file>> host_files_below(const std::string& dir, uint64_t max_files,
                                                uint64_t max_bytes);

/// The bytes of `rel` below `dir`, opened without following any symlink.
result<std::string> read_host_file(const std::string& dir, const std::string& rel);

/// Writes `bytes` to `rel` below `dir` (missing directories made): never through a symlink
/// (every directory opened without following one; the file written under a temporary name
/// and renamed over the old one, which replaces a link rather than writing through it).
/// `rel` must be plain: no empty, `.` or `..` part (bad_request).
result<bool> write_host_file(const std::string& dir, const std::string& rel,
                             const std::string& bytes);

struct session_task_state {
  static inline const char* name = "session_task";
  controlplane_actor cp;
  session_task_options opts;
  command_outcome outcome;     ///< a command's output so far, in order
  line_relay_actor relay;      ///< a streamed command: where each piece goes as it arrives
  std::optional<failure> stop; ///< why the command was killed (caller gone, server stopping)
};

/// The exec request of a session command: `timeout` (its own process group, all of which
/// it kills) → `env K=V…` → a fixed `/bin/sh` script that changes to `cwd` and execs
/// `sh -lc COMMAND` with stdin /dev/null. The command and cwd travel as arguments, never
/// through a shell's parsing; /bin/sh is absolute so the caller's PATH cannot hide it.
exec_request session_exec_request(const session_command& cmd);

/// The guest-side file tool's request: `python3 -I -c <guest/session_files.py> <json>`.
exec_request session_tool_request(const std::string& args_json);

/// The tool's one answer line: `OK <json>` → the JSON; `ERR <code> <base64 message>` → the
/// failure it names; anything else → guest_failed with what the guest printed.
result<std::string> session_tool_answer(const exec_result& r);

/// See actors.hpp.
session_task_actor::behavior_type
session_task(session_task_actor::stateful_pointer<session_task_state> self,
             controlplane_actor cp, session_task_options opts);

} // namespace guestflow
