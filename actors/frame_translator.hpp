#pragma once

#include "common/line_assembler.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"
#include "messages/run.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

struct frame_translator_options {
  size_t max_line = size_t{1} << 20;     ///< one frame; longer fails the run
  size_t stderr_tail = size_t{64} << 10; ///< stderr kept for error messages
  size_t stderr_excerpt = 2048;          ///< of which quoted in a message
  uint32_t timeout_seconds = 0;          ///< the guest's wall clock, for the timeout message
};

/// Turns what a run's guest prints into run events (DESIGN.md "Guest frames" → "Run
/// events"), without run_id and seq (the run actor stamps them). Guest output is untrusted:
/// lines are capped, frames decoded strictly, and the first protocol violation (a line
/// over the cap, a malformed frame) decides the outcome and ends translation — the caller
/// should then stop the guest. `token` and `message` frames are relayed as events of those
/// names, their `data` verbatim; a step's `result` and `types` ride on `vertex_built`.
/// The terminal event comes from `finish`, once the execution has answered, and only then:
/// exit 0 after a `done` frame, with no vertex failed, is `complete` with the last `outputs`
/// frame (and the `state` frame's context); a timeout, OOM or kill outcome, a failed vertex
/// (as Langflow raises: `guest_failed` with lfx's ComponentBuildError text for the first
/// one, "Error building Component <name>: \n\n<error>"), a `fatal` frame, a truncated
/// last line, a non-zero exit or a missing `done` is one `error`. Either says which
/// executor the runner chose, and an error which vertices failed. A `fatal` frame's own
/// `code` is kept when it is one a runner can mean (bad_request, unavailable), else it is
/// `guest_failed`.
class frame_translator {
public:
  explicit frame_translator(frame_translator_options opts = {});

  /// One line of the streamed exec; appends the events it yields to `out`.
  void on_line(const exec_stream_line& line, std::vector<run_event>& out);

  /// The first protocol violation, once there is one.
  const std::optional<failure>& violation() const noexcept { return violation_; }

  bool done_seen() const noexcept { return done_; }

  /// Bytes of stderr held (≤ 2 × stderr_tail).
  size_t stderr_held() const noexcept { return stderr_.size(); }

  /// The terminal event for an execution that answered with a report. Call it once: it
  /// hands the run's outputs and context over to the event instead of copying them.
  run_event finish(const execution_report& report);

  /// The terminal event for an execution that failed (create refused, capacity, cancel…).
  /// A protocol violation seen before still takes precedence: it is why the run stopped.
  run_event finish(const failure& f);

private:
  run_event terminal(const execution_report& report);
  /// `e` with what every terminal event carries: the executor and the failed vertices.
  run_event stamped(run_event e) const;
  void on_stdout_line(std::string_view line, std::vector<run_event>& out);
  void violate(std::string message);
  std::string stderr_excerpt() const;

  frame_translator_options opts_;
  line_assembler lines_;
  std::optional<failure> violation_;
  std::optional<failure> fatal_;
  std::string executor_;            ///< from the runner's first note that names one
  std::vector<std::string> failed_; ///< ids of vertex_failed events, in order
  std::string first_failure_;       ///< Langflow's text for the first failed vertex
  shared_extras context_;           ///< the `state` frame's context
  std::vector<run_outputs> outputs_;
  std::string stderr_;
  std::string stream_error_; ///< the control plane's last `{"error":…}` line
  bool done_ = false;
};

/// The terminal `error` event of `f`.
run_event error_event(const failure& f);

} // namespace guestflow
