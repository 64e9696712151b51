// The guest frame parser: what a run's guest prints, as the runtime receives it — the
// control plane's NDJSON exec stream (messages/sandbox.hpp exec_stream_line) carrying the
// runner's stdout, whose lines are frames (messages/run.hpp decode_frame) turned into run
// events by actors/frame_translator. An input is that NDJSON; a line that is not a valid
// stream line is taken as raw guest stdout, so both layers see hostile bytes.
//
// Properties: decode_frame is total and stable; the translator emits no terminal event
// before `finish`, exactly one from it, only events that survive encode/decode, holds a
// bounded stderr; and its events do not depend on how the stdout bytes were chunked.

#include "actors/frame_translator.hpp"
#include "messages/sandbox.hpp"
#include "tests/fuzz/json_support.hpp"

#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::fuzz;

namespace {

using sk = exec_stream_line::kind;

void check_frame(std::string_view line) {
  auto f = decode_frame(line);
  if (!f) return check_refusal(f.error(), "decode_frame");
  auto bytes = encode(*f);
  auto back = decode_frame(bytes);
  FUZZ_CHECK(back, "a frame's own encoding does not decode: " + bytes);
  FUZZ_CHECK(*back == *f, "a frame changed through encode/decode: " + bytes);
}

void check_event(const run_event& e) {
  auto bytes = encode(e);
  auto back = decode<run_event>(bytes);
  FUZZ_CHECK(back, "the translator emitted an event that does not decode: " + bytes +
                       (back ? "" : "\n" + back.error().message));
  FUZZ_CHECK(back->type == e.type, "event type changed on the wire: " + bytes);
}

exec_stream_line chunk_line(sk type, std::string_view text) {
  exec_stream_line l;
  l.type = type;
  l.text = std::string{text};
  return l;
}

struct translation {
  std::vector<run_event> events;
  run_event terminal;
};

translation translate(const std::vector<exec_stream_line>& stream,
                      const frame_translator_options& opts, const execution_report& report) {
  frame_translator t{opts};
  translation out;
  for (auto& line : stream) {
    auto before = out.events.size();
    t.on_line(line, out.events);
    for (auto i = before; i < out.events.size(); ++i) {
      FUZZ_CHECK(!out.events[i].terminal(), "a terminal event before finish");
      check_event(out.events[i]);
    }
    FUZZ_CHECK(t.stderr_held() <= 2 * opts.stderr_tail, "stderr held past twice its tail");
  }
  out.terminal = t.finish(report);
  FUZZ_CHECK(out.terminal.terminal(), "finish gave a non-terminal event");
  check_event(out.terminal);
  return out;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto input = as_view(data, size);
  draws d{fingerprint(input)};

  // The stream as the control plane would send it; raw lines stand for guest stdout.
  std::vector<exec_stream_line> stream;
  std::string all_stdout, all_stderr;
  std::optional<int32_t> exit_code;
  for (std::string_view rest = input; !rest.empty();) {
    auto nl = rest.find('\n');
    auto line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
    check_frame(line);
    auto decoded = decode<exec_stream_line>(line);
    exec_stream_line l;
    if (decoded) {
      l = std::move(*decoded);
    } else {
      l.type = sk::stdout_chunk;
      l.text = std::string{line} + (nl == std::string_view::npos ? "" : "\n");
    }
    if (l.type == sk::stdout_chunk) all_stdout += l.text;
    if (l.type == sk::stderr_chunk) all_stderr += l.text;
    if (l.type == sk::exit_code) exit_code = l.exit_code;
    stream.push_back(std::move(l));
  }

  frame_translator_options opts;
  if (d.below(2) == 0) { // small caps: overflow and stderr trimming on short inputs
    opts.max_line = 16 + d.below(240);
    opts.stderr_tail = 48;
    opts.stderr_excerpt = 16;
  }
  opts.timeout_seconds = 30;
  execution_report report;
  report.result.exit_code = exit_code.value_or(0);
  switch (d.below(4)) {
  case 0:
    report.outcome = ec::timeout;
    break;
  case 1:
    report.outcome = ec::oom;
    break;
  default:
    break;
  }
  auto first = translate(stream, opts, report);

  // The same bytes, cut elsewhere: stdout and stderr re-chunked, error lines in order.
  std::vector<exec_stream_line> recut;
  for (auto piece : chunks(all_stdout, d))
    recut.push_back(chunk_line(sk::stdout_chunk, piece));
  for (auto piece : chunks(all_stderr, d))
    recut.push_back(chunk_line(sk::stderr_chunk, piece));
  for (auto& l : stream)
    if (l.type == sk::error) recut.push_back(l);
  auto second = translate(recut, opts, report);
  FUZZ_CHECK(first.events == second.events, "events depend on how stdout was chunked");
  FUZZ_CHECK(first.terminal == second.terminal,
             "the terminal event depends on chunking: " + encode(first.terminal) + " vs " +
                 encode(second.terminal));

  // A failed execution: still exactly one terminal error.
  frame_translator t{opts};
  std::vector<run_event> ignored;
  for (auto& l : stream)
    t.on_line(l, ignored);
  auto e = t.finish(fail(ec::unavailable, "control plane went away"));
  FUZZ_CHECK(e.type == run_event::kind::error, "finish(failure) is not an error event");
  check_event(e);
  return 0;
}
