#pragma once

#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

/// The real `guestflow control-plane` as a child process, for tests and benches.
namespace guestflow::testing {

class control_plane_process {
public:
  /// Starts `GUESTFLOW_BIN control-plane --listen 127.0.0.1:0 --state-dir DIR args…` and
  /// waits (deadline) for its first stdout line `listening on http://127.0.0.1:PORT`.
  /// Throws std::runtime_error (with the server's stderr) if it exits or stays silent.
  control_plane_process(const std::filesystem::path& state_dir,
                        const std::vector<std::string>& args = {},
                        const std::map<std::string, std::string>& env = {});
  /// Starts `GUESTFLOW_BIN argv…` — any command that listens and prints the same first
  /// line (e.g. `serve --listen 127.0.0.1:0`) — with stderr kept in `stderr_file`.
  control_plane_process(const std::vector<std::string>& argv,
                        const std::map<std::string, std::string>& env,
                        std::filesystem::path stderr_file);
  ~control_plane_process(); ///< SIGKILLs a server still running
  control_plane_process(const control_plane_process&) = delete;
  control_plane_process& operator=(const control_plane_process&) = delete;

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  /// SIGTERM, then wait (deadline); returns the exit status (128+signal if killed).
  int stop(std::chrono::seconds timeout = std::chrono::seconds{30});

  /// Everything the server wrote to stderr so far.
  std::string stderr_text() const;

  /// Runs the binary to completion (for start-up refusals): exit status and stderr.
  struct outcome {
    int status = -1;
    std::string stdout_text;
    std::string stderr_text;
  };
  static outcome run_to_exit(const std::vector<std::string>& args,
                             const std::map<std::string, std::string>& env = {},
                             std::chrono::seconds timeout = std::chrono::seconds{30});

private:
  void start(const std::vector<std::string>& argv,
             const std::map<std::string, std::string>& env);

  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  uint16_t port_ = 0;
  std::filesystem::path stderr_file_;
};

} // namespace guestflow::testing
