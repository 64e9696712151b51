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
  std::string download_prefix = "/workspace";        ///< GUESTFLOW_DOWNLOAD_PREFIX
  std::chrono::seconds call_timeout{120};            ///< a file call's exec, upload or fetch
};

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
