#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/guests/host_command.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

/// gVisor guests keep their memory across stop and start: `runsc checkpoint` writes the
/// whole sandbox (processes, memory, open files, its tmpfs) into one image file and ends it;
/// `runsc restore` makes a new sandbox of the same bundle from it, the processes going on
/// where they stopped. Mount sources, netns and the bundle path may differ at restore (the
/// gofer reopens files by path), so a checkpoint restores on another node too.
///
/// Where: a persistent guest's checkpoint lies beside its workspace (`<guest dir>/checkpoint/`,
/// on a fleet under the shared workspace root), an image's snapshot in the image's own
/// directory (`<images>/<name>/snapshot/`). Both are written to a `.partial` sibling first and
/// renamed into place only when runsc succeeded, so a half-written one is never restored; a
/// restore reads the image file and never writes it, so one snapshot serves every create, each
/// a sandbox of its own.
namespace guestflow::local {

/// The checkpoint directory beside a guest's workspace.
std::filesystem::path checkpoint_dir(const std::filesystem::path& guest_dir);

/// True when `dir` holds a complete checkpoint (a non-empty checkpoint.img).
bool has_checkpoint(const std::filesystem::path& dir);

/// Runs `runsc … ARGS` on the guest (run_runsc: its global flags, in its netns).
using runsc_runner = std::function<result<command_output>(const std::vector<std::string>&)>;

/// `checkpoint --image-path <dir>.partial <container>` through `runsc`, then renamed to `dir`
/// (replacing an older one). runsc ends the sandbox on success; on failure the sandbox may
/// still run and nothing is left at `dir`.
result<bool> write_checkpoint(const runsc_runner& runsc, const std::string& container,
                              const std::filesystem::path& dir);

/// The runsc command (launch_request::gvisor_command) that restores `dir` instead of booting.
std::vector<std::string> restore_command(const std::filesystem::path& dir);

/// Removes `dir` and a leftover `.partial`. Idempotent.
void remove_checkpoint(const std::filesystem::path& dir);

/// How a guest came to run: booted, or restored from its checkpoint or its image's snapshot.
struct restored_guest {
  result<guest_runtime> rt{fail(ec::unavailable, "not built")};
  std::string started_from = "boot"; ///< "boot" | "checkpoint" | "snapshot"
  /// Why the checkpoint or snapshot could not be restored (the guest then booted cold).
  std::string restore_error;
};

/// Builds `spec`, restoring `dir` (`from`: "checkpoint" or "snapshot") when it holds one: a
/// restore that fails boots cold from the same spec instead (the kept workspace is attached
/// as it is either way; create() removed what the failed restore built). A checkpoint is
/// spent once a guest runs (restored or booted, it diverges from it); a snapshot is kept.
restored_guest restore_or_boot(guest_backend& backend, guest_spec spec,
                               const std::filesystem::path& dir, const std::string& from);

/// A snapshot's python3 (`python3 -c snapshot_waiter_script WAITER_SOURCE PRELOAD`,
/// WAITER_SOURCE the python waiter's script, PRELOAD its comma-separated modules): imports
/// PRELOAD, prints its failures (one a line) then "ready" and closes its stdio, then blocks on
/// a FIFO in the sandbox's /tmp. The sandbox is checkpointed there, so each guest restored from
/// the snapshot has this interpreter, modules imported, waiting. Its first `python3 …` runs
/// through snapshot_relay(): the waiter forks, the child becomes the python waiter with the
/// relay's pipes as its stdout/stderr and gets the request, the parent reports the exit code.
extern const char* const snapshot_waiter_script;

/// How long snapshot_relay() and snapshot_dismiss() wait for the waiting python3 to take
/// their request before they give up (the relay: exit 125; the FIFO is removed either way).
inline constexpr int snapshot_handoff_seconds = 5;

/// The exec that hands `request` (python_waiter::request_for's, NUL-separated) to a restored
/// snapshot's waiter: a shell in the guest whose output is the program's and whose exit code
/// is the program's (125: no waiter listening, or it did not take the request within
/// snapshot_handoff_seconds; 137: the program was killed).
exec_request snapshot_relay(const std::string& request);

/// The exec that starts snapshot_waiter_script (WAITER_SOURCE, PRELOAD as there) in a running
/// gVisor guest, detached: the exec's output is the waiter's preload failures then "ready"
/// once it waits on the FIFO, and it ends then, the python3 going on waiting. What a gVisor
/// pool guest gets instead of the python waiter (which reaches its interpreter through the
/// host's /proc, and cannot see into the Sentry): its first `python3 …` goes through
/// snapshot_relay() as a restored snapshot's does.
exec_request detached_snapshot_waiter(const std::string& waiter_source,
                                      const std::string& preload);

/// The exec that ends an unused snapshot waiter (a first exec it will not serve).
exec_request snapshot_dismiss();

} // namespace guestflow::local
