#pragma once

#include "controlplane/local/control_plane.hpp"
#include "controlplane/local/http_server.hpp"

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

namespace guestflow::local {

struct serve_options {
  std::string listen = "127.0.0.1:0"; ///< HOST:PORT, [V6]:PORT
  std::filesystem::path state_dir;    ///< records, lock, guest workspaces
  http_options http;                  ///< includes the API key
  control_plane_config domain;
  unsigned workers = 4; ///< threads for blocking backend / SQLite calls
  /// Bench/test-only: serve simulated_control_plane with this latency, no guests.
  std::optional<uint32_t> simulate_latency_ms;
  /// Test-only: the nft binary the backend uses (a missing one proves the fail-closed path).
  std::optional<std::string> nft_path;
};

/// Runs the embedded control plane until SIGTERM/SIGINT: locks the state dir, binds,
/// reconciles the records with the host, prints `listening on http://HOST:PORT` on `out`
/// (flushed: it is the readiness signal), then serves. Returns the process exit code:
/// 0 after a clean stop, 2 for refused configuration, 1 for failures to start.
int serve(const serve_options& opts, std::ostream& out, std::ostream& err);

} // namespace guestflow::local
