#pragma once

#include <chrono>
#include <cstdint>
#include <string>

/// The HTTP side's settings, free of any HTTP or I/O library, so that serve.hpp (what apps/
/// include) can carry them without bringing Asio or Beast along.
namespace guestflow::local {

struct exec_limits {
  uint64_t max_stdout_bytes = uint64_t{16} << 20;
  uint64_t max_stderr_bytes = uint64_t{1} << 20;
  /// After the command exited, how long a grandchild may keep its stdout/stderr open
  /// before the pump stops waiting for EOF.
  std::chrono::milliseconds exit_grace{2000};
};

struct http_options {
  std::string api_key;                          ///< empty: no authentication
  uint64_t max_json_bytes = uint64_t{1} << 20;  ///< JSON request bodies
  uint64_t max_file_bytes = uint64_t{64} << 20; ///< PUT …/files bodies
  exec_limits exec;                             ///< output caps per exec call
  std::chrono::milliseconds heartbeat{5000};    ///< streamed exec `{"hb":true}` interval
  std::chrono::seconds idle_timeout{120};       ///< a request must arrive / be sent within
  std::chrono::seconds write_timeout{60};       ///< a streamed line must leave within
  /// `--ingress-domain D`: Host `{port}-{id}.D` reaches the guest's port at `/`; empty: the
  /// service URLs are path-based only.
  std::string ingress_domain;
  /// Proxied connections one guest's service URLs may hold open at once (429 past it).
  uint32_t max_ingress_connections = 256;
};

} // namespace guestflow::local
