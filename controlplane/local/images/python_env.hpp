#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

/// A Python environment of this host as a guest image (`guestflow image add NAME
/// --python-env PREFIX`): the guest keeps the host's /usr layout and gets PREFIX — and,
/// for a venv made from an interpreter outside /usr (pyvenv.cfg `home = /root/.pyenv/…`),
/// that base installation too — bound read-only at the same path, with PREFIX/bin first on
/// its PATH, so `python3` is the environment's.
namespace guestflow::local {

struct python_env_layout {
  std::string prefix;                ///< canonical PREFIX
  std::vector<std::string> ro_binds; ///< directories to bind (none below /usr: already there)
  std::string path_prepend;          ///< PREFIX/bin
  uint64_t size_bytes = 0;           ///< file bytes below PREFIX (one file system)
};

/// Validates `prefix` and finds what the guest needs. bad_request when PREFIX is missing,
/// not a directory, has no executable bin/python (or bin/python3), is not readable by other
/// users (the guest's uid), or it or its base installation lies where the guest's sandbox
/// has its own directories (/, /proc, /dev, /sys, /etc, /workspace, /tmp itself).
result<python_env_layout> inspect_python_env(const std::filesystem::path& prefix);

} // namespace guestflow::local
