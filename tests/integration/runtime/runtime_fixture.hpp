#pragma once

// The CLI as a user runs it, against the real local control plane (a child process on
// 127.0.0.1:0) with real guests: shared by the runtime's integration tests.

#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <functional>
#include <gtest/gtest.h>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace guestflow::testing {

class runtime_fixture : public ::testing::Test {
protected:
  test_support::temp_dir dir{"guestflow-cp-test"};
  std::unique_ptr<control_plane_process> cp;

  void SetUp() override;
  /// Deletes whatever guest a test left (reusable ones outlive their runs by design).
  void TearDown() override;

  /// The environment a CLI run gets: this control plane, a private state dir, `extra`.
  std::map<std::string, std::string> env(std::map<std::string, std::string> extra = {}) const;

  /// Writes `content` to a file in the test's directory; returns its path.
  std::string file(const std::string& name, const std::string& content) const;

  /// `guestflow ARGS…` to completion.
  control_plane_process::outcome cli(const std::vector<std::string>& args,
                                     std::map<std::string, std::string> extra = {}) const;

  /// `guestflow ARGS…` in the background; its stdout is readable from `*stdout_fd` when
  /// given (else discarded), stderr discarded.
  static pid_t start_cli(const std::vector<std::string>& args,
                         const std::map<std::string, std::string>& vars,
                         int* stdout_fd = nullptr);

  /// How read_stream stopped.
  enum class stream_end { enough, eof, deadline };
  /// Hands what `fd` yields, chunk by chunk, to `on_chunk` until it returns true (it has
  /// seen enough), the stream ends, or `deadline` passes.
  static stream_end read_stream(int fd, const std::function<bool(std::string_view)>& on_chunk,
                                std::chrono::milliseconds deadline = std::chrono::seconds{60});

  /// Polls (deadline) until the control plane has `n` live guests.
  bool wait_for_live(size_t n) const;

  /// Guests the control plane still has alive (not destroyed, not failed).
  std::vector<sandbox_view> live_guests() const;
};

} // namespace guestflow::testing
