#pragma once

#include "messages/error.hpp"

#include <chrono>
#include <filesystem>
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

/// `runsc <global> checkpoint --image-path <dir>.partial <container>`, then renamed to `dir`
/// (replacing an older one). runsc ends the sandbox on success; on failure the sandbox may
/// still run and nothing is left at `dir`.
result<bool> write_checkpoint(const std::vector<std::string>& runsc_global,
                              const std::string& container, const std::filesystem::path& dir,
                              std::chrono::milliseconds timeout = std::chrono::seconds(60));

/// The runsc command (launch_request::gvisor_command) that restores `dir` instead of booting.
std::vector<std::string> restore_command(const std::filesystem::path& dir);

/// Removes `dir` and a leftover `.partial`. Idempotent.
void remove_checkpoint(const std::filesystem::path& dir);

} // namespace guestflow::local
