#pragma once

// Three real control planes on this machine (each its own state dir; guest ids name their
// cgroups, so they never collide) and the CLI as a user runs it against them: the fleet's
// integration tests.

#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace guestflow::testing {

/// A `guestflow` CLI run in the background, its stdout/stderr kept in files.
class cli_run {
public:
  cli_run(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
          const std::filesystem::path& scratch);
  ~cli_run(); ///< SIGKILLs a run still going
  cli_run(const cli_run&) = delete;
  cli_run& operator=(const cli_run&) = delete;

  struct outcome {
    int status = -1;
    std::string out;
    std::string err;
  };
  /// Waits (deadline) for the exit; a run that overstays is killed (status 128+9).
  outcome wait(std::chrono::seconds timeout = std::chrono::seconds{180});
  /// The outcome if the run has exited, without waiting (the same one on every call).
  std::optional<outcome> try_wait();
  void signal(int sig) const;
  /// What the run has printed to stdout so far.
  std::string out_so_far() const;
  /// What the run has printed to stderr so far.
  std::string err_so_far() const;
  pid_t pid() const { return pid_; }

private:
  outcome finish(int wait_status);

  pid_t pid_ = -1;
  bool done_ = false;
  std::optional<outcome> ended_;
  std::filesystem::path out_, err_;
};

class fleet_fixture : public ::testing::Test {
protected:
  test_support::temp_dir dir{"guestflow-fleet"};
  std::vector<std::unique_ptr<control_plane_process>> nodes;
  std::vector<std::string> names;

  /// Deletes what any node still holds (a failed test must not leak guests).
  void TearDown() override;

  /// Starts node `name` (its own state dir under the test's) with `args`; returns its index.
  size_t start_node(const std::string& name, const std::vector<std::string>& args = {});
  /// SIGKILLs node `i` (no goodbye: its guests and records stay where they are).
  void kill_node(size_t i);
  /// Starts node `i` again on its state dir, with the same port when `same_port`.
  void restart_node(size_t i, const std::vector<std::string>& args = {});
  std::string url(size_t i) const;
  /// "URL1,URL2,URL3" — GUESTFLOW_CONTROL_PLANE_URL's static fleet.
  std::string urls() const;

  /// The environment of a CLI run against the static fleet; `runtime` names its state dir
  /// (two runtimes = two names).
  std::map<std::string, std::string> env(const std::string& runtime = "runtime",
                                         std::map<std::string, std::string> extra = {}) const;
  std::string file(const std::string& name, const std::string& content) const;

  /// Every record node `i` holds (destroyed ones included: where guests were placed).
  std::vector<sandbox_view> records(size_t i) const;
  /// Node `i`'s guests not destroyed or failed.
  std::vector<sandbox_view> live(size_t i) const;
  size_t live_total() const;
  /// POST or DELETE /v1/drain on node `i`; the HTTP status.
  unsigned drain(size_t i, bool on) const;

private:
  std::vector<std::vector<std::string>> args_;
  std::vector<uint16_t> ports_;
};

} // namespace guestflow::testing
