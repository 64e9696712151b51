#include "actors/frame_translator.hpp"

namespace guestflow {
namespace {

run_event event_of(run_event::kind k) {
  run_event e;
  e.type = k;
  return e;
}

/// A failed vertex's message: its step's `error`, else its outputs' `error`, else its
/// logs, else its outputs.
std::string vertex_error(const guest_frame& f) {
  if (!f.error.empty()) return f.error;
  if (auto e = error_member(f.vertex_outputs)) return *e;
  if (!f.logs.empty()) return f.logs;
  if (!f.vertex_outputs.empty() && f.vertex_outputs.text != "{}" &&
      f.vertex_outputs.text != "null")
    return f.vertex_outputs.text;
  return "vertex " + (f.name.empty() ? f.id : f.name) + " failed without a message";
}

/// The runner may classify its own failure; only the codes a runner can mean are taken
/// from a guest (it must not claim `timeout`, `oom` or `cancelled`, which the host decides).
ec fatal_code(std::string_view name) {
  auto c = ec_from_string(name);
  if (c && (*c == ec::bad_request || *c == ec::unavailable)) return *c;
  return ec::guest_failed;
}

/// What Langflow raises for a vertex that failed to build (lfx's `ComponentBuildError`, from
/// `Vertex._build_results`): "Error building Component <display name>: \n\n<error>". An
/// error that already is that text (lfx in the guest raised it) is kept as it is.
std::string component_build_error(const std::string& name, const std::string& error) {
  constexpr std::string_view prefix = "Error building Component ";
  if (error.compare(0, prefix.size(), prefix) == 0) return error;
  std::string out{prefix};
  out += name;
  out += ": \n\n";
  out += error;
  return out;
}

} // namespace

run_event error_event(const failure& f) {
  auto e = event_of(run_event::kind::error);
  e.code = f.code;
  e.message = f.message;
  return e;
}

frame_translator::frame_translator(frame_translator_options opts)
    : opts_(opts)
    , lines_(opts.max_line) {}

void frame_translator::violate(std::string message) {
  if (!violation_) violation_ = fail(ec::guest_failed, std::move(message));
}

void frame_translator::on_line(const exec_stream_line& line, std::vector<run_event>& out) {
  using k = exec_stream_line::kind;
  switch (line.type) {
  case k::stdout_chunk:
    if (violation_) return;
    if (!lines_.feed(line.text, [&](std::string_view l) { on_stdout_line(l, out); }))
      violate("the runner printed a line longer than " + std::to_string(opts_.max_line) +
              " bytes (the frame limit); the run was stopped. Output that large belongs "
              "in a file, not on stdout");
    return;
  case k::stderr_chunk:
    stderr_ += line.text;
    if (stderr_.size() > 2 * opts_.stderr_tail) // amortized: trim in halves, not per chunk
      stderr_.erase(0, stderr_.size() - opts_.stderr_tail);
    return;
  case k::error:
    stream_error_ = line.text.substr(0, 4096);
    return;
  case k::exit_code:
  case k::heartbeat:
  case k::outcome:
    return; // the execution's report carries the exit
  }
}

void frame_translator::on_stdout_line(std::string_view line, std::vector<run_event>& out) {
  if (violation_) return;
  decode_limits limits;
  limits.max_bytes = opts_.max_line;
  auto frame = decode_frame(line, limits);
  if (!frame) {
    violate("the runner sent a malformed frame: " + frame.error().message);
    return;
  }
  using fk = guest_frame::kind;
  using ek = run_event::kind;
  auto& f = *frame;
  switch (f.type) {
  case fk::note:
    if (executor_.empty() && (f.executor == "core" || f.executor == "lfx"))
      executor_ = std::move(f.executor);
    return;
  case fk::vertex_start: {
    auto e = event_of(ek::vertex_started);
    e.id = std::move(f.id);
    e.name = std::move(f.name);
    out.push_back(std::move(e));
    return;
  }
  case fk::step: {
    auto e = event_of(f.valid ? ek::vertex_built : ek::vertex_failed);
    if (f.valid) {
      e.valid = true;
      e.duration_ms = f.duration_ms;
      e.outputs = std::move(f.vertex_outputs);
      e.logs = std::move(f.logs);
      e.extras = std::move(f.extras); // its result and types
    } else {
      e.message = vertex_error(f);
      if (failed_.empty())
        first_failure_ = component_build_error(f.name.empty() ? f.id : f.name, e.message);
      failed_.push_back(f.id);
    }
    e.id = std::move(f.id);
    e.name = std::move(f.name);
    out.push_back(std::move(e));
    return;
  }
  case fk::token:
  case fk::message: {
    auto e = event_of(f.type == fk::token ? ek::token : ek::message);
    e.id = std::move(f.id);
    e.extras = std::move(f.extras); // its data
    out.push_back(std::move(e));
    return;
  }
  case fk::state:
    context_ = std::move(f.extras); // its context
    return;
  case fk::outputs:
    outputs_ = std::move(f.run_outputs_list);
    return;
  case fk::done:
    done_ = true;
    return;
  case fk::fatal:
    if (!fatal_) {
      fatal_ = fail(fatal_code(f.code), f.error.empty()
                                            ? std::string{"the runner failed without a message"}
                                            : std::move(f.error));
    }
    return;
  case fk::stdout_line: {
    auto e = event_of(ek::stdout_line);
    e.line = std::move(f.line);
    out.push_back(std::move(e));
    return;
  }
  }
}

std::string frame_translator::stderr_excerpt() const {
  std::string out;
  if (!stream_error_.empty()) out += "; control plane: " + stream_error_;
  if (stderr_.empty()) return out;
  auto n = std::min(stderr_.size(), opts_.stderr_excerpt);
  auto from = stderr_.size() - n;
  while (from < stderr_.size() && (static_cast<unsigned char>(stderr_[from]) & 0xC0) == 0x80)
    ++from; // start on a character boundary
  out += "; stderr";
  out += from > 0 ? " (tail): " : ": ";
  out.append(stderr_, from, std::string::npos);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

run_event frame_translator::finish(const failure& f) {
  return stamped(error_event(violation_ ? *violation_ : f));
}

run_event frame_translator::stamped(run_event e) const {
  e.executor = executor_;
  e.failed = failed_;
  return e;
}

run_event frame_translator::finish(const execution_report& report) {
  auto e = stamped(terminal(report));
  e.truncated = report.result.truncated;
  return e;
}

run_event frame_translator::terminal(const execution_report& report) {
  if (violation_) return error_event(*violation_);
  auto exit = report.result.exit_code;
  if (report.outcome == ec::timeout)
    return error_event(fail(ec::timeout, "the flow ran past its " +
                                             std::to_string(opts_.timeout_seconds) +
                                             " s limit and was killed" + stderr_excerpt()));
  if (report.outcome == ec::oom)
    return error_event(fail(ec::oom, "the guest ran out of memory (exit 137); use a larger "
                                     "CREATEOS_EXECUTOR_SHAPE" +
                                         stderr_excerpt()));
  if (report.outcome == ec::killed)
    return error_event(fail(ec::killed, "the runner was killed (SIGKILL, exit 137) before its "
                                        "time limit, and not by the memory limit" +
                                            stderr_excerpt()));
  // Langflow stops at the first vertex that fails and raises its error: the run is an
  // error whatever the runner did next (outputs and done, or a fatal).
  if (!failed_.empty()) return error_event(fail(ec::guest_failed, first_failure_));
  if (fatal_) return error_event(*fatal_);
  if (report.result.truncated.stdout_cut && !done_)
    return error_event(
        fail(ec::guest_failed, "the runner's output was cut at the control plane's output cap "
                               "(truncated: stdout), so its frames were lost; print less" +
                                   stderr_excerpt()));
  if (lines_.pending() > 0)
    return error_event(fail(ec::guest_failed,
                            "runner output ended in the middle of a frame (" +
                                std::to_string(lines_.pending()) +
                                " bytes without a newline, exit code " + std::to_string(exit) +
                                "): the guest was killed mid-line" + stderr_excerpt()));
  if (!done_)
    return error_event(
        fail(ec::guest_failed, "runner output ended without a done frame (exit code " +
                                   std::to_string(exit) + ")" + stderr_excerpt()));
  if (exit != 0)
    return error_event(fail(ec::guest_failed, "the runner exited with code " +
                                                  std::to_string(exit) +
                                                  " after its done frame" + stderr_excerpt()));
  auto e = event_of(run_event::kind::complete);
  e.run_outputs_list = std::move(outputs_); // the run's one terminal event: moved, not copied
  e.extras = std::move(context_);
  return e;
}

} // namespace guestflow
