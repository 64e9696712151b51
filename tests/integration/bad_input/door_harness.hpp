#pragma once

// What the bad-input and outcome tests share: a bridge fixture whose control plane cuts
// output at a small cap, the plugin as a process, and the control plane's footprint.

#include "tests/integration/bridge/bridge_fixture.hpp"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace guestflow::testing {

/// The control plane's output caps in these tests: small, so a cut costs no 16 MiB.
inline constexpr size_t test_output_cap = 64 * 1024;

class door_fixture : public bridge_fixture {
protected:
  void SetUp() override;

  /// `python3 plugin_door.py CASE` with the plugin on the path, pointed at this server;
  /// `extra` adds environment variables. Returns its one JSON line.
  std::string plugin(const std::string& case_json,
                     const std::map<std::string, std::string>& extra = {}) const;

  /// Every guest record the control plane has, destroyed ones included.
  size_t guest_records() const;

  /// The files under the control plane's state dir (its database and sockets aside).
  std::set<std::string> control_plane_files() const;
};

/// Runs `argv` with `env` added to this process's environment; stdout and exit status.
struct process_outcome {
  int status = -1;
  std::string stdout_text;
};
process_outcome run_process(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env);

} // namespace guestflow::testing
