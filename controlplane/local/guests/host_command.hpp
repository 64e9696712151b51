#pragma once

#include "messages/error.hpp"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace guestflow::local {

/// How to run one host tool (`ip`, `nft`).
struct command_options {
  std::string input; ///< fed on stdin
  int netns_fd = -1; ///< run inside this network namespace (setns before exec)
  /// Written (path, value) after entering `netns_fd`: /proc/sys/net is the opener's netns.
  std::vector<std::pair<std::string, std::string>> netns_sysctls;
  std::chrono::milliseconds timeout{10000};
};

struct command_output {
  int exit_code = -1;
  std::string output; ///< stdout and stderr, interleaved
};

/// Runs argv[0] (an absolute path) with the server's environment and waits for it. Fails
/// (ec::unavailable) only when it cannot be started or overruns its timeout; a non-zero
/// exit is a normal result.
result<command_output> run_command(const std::vector<std::string>& argv,
                                   const command_options& opt = {});

/// Writes `value` to a host file such as a /proc/sys entry.
bool write_file(const std::string& path, const std::string& value);

} // namespace guestflow::local
