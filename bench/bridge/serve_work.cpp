// bench_serve_work --flow FILE --frames FILE [--runs N] [--smoke]
//
// The user-space work `guestflow serve` does per streamed whole-flow run on top of the
// runtime's own (bench_runtime --flow prices that, frame translation included): the request
// decoded (decode<run_request> of the very body bench_bridge sends) and each of the run's
// events encoded as an NDJSON line, as the run's relay does. One thread, a hot loop, no
// sockets, HTTP or actors: with the runtime's CPU for the same flow it is the least a
// server of this design spends per streamed run, a floor that grows with the flow's size.
// Printed: `serve work: X us CPU per run (decode D us for B bytes, E events encoded in N us)`.
// --smoke: a few hundred runs, for ctest (asserts that the request decodes and the frames
// yield a complete run, never timings).
#include "actors/frame_translator.hpp"
#include "bench/load_flags.hpp"
#include "messages/run.hpp"
#include "tests/support/slurp.hpp"

#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using namespace guestflow;

namespace {

/// The whole file; a bench input that cannot be read (or is empty) stops the bench.
std::string slurp(const std::string& path) {
  auto text = test_support::slurp(path);
  if (text.empty()) throw std::runtime_error("cannot read " + path + " (or it is empty)");
  return text;
}

double cpu_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

/// The run's events as its relay receives them (stamped), from the canned frames.
std::vector<run_event> events_of(const std::string& frames) {
  frame_translator t;
  std::vector<run_event> out;
  exec_stream_line line;
  line.type = exec_stream_line::kind::stdout_chunk;
  line.text = frames;
  t.on_line(line, out);
  if (t.violation()) throw std::runtime_error("frames: " + t.violation()->message);
  execution_report report;
  report.result.exit_code = 0;
  out.push_back(t.finish(report));
  if (out.back().type != run_event::kind::complete)
    throw std::runtime_error("frames: the run does not complete: " + out.back().message);
  uint64_t seq = 0;
  for (auto& e : out) {
    e.run_id = "run-0123456789abcdef";
    e.seq = seq++;
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  size_t runs = 20'000;
  std::string flow_path, frames_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = bench::uint_flag<size_t>(a, argv[++i], 1);
    else if (a == "--flow" && i + 1 < argc)
      flow_path = argv[++i];
    else if (a == "--frames" && i + 1 < argc)
      frames_path = argv[++i];
    else if (a == "--smoke")
      runs = 300;
    else {
      std::fprintf(stderr, "usage: bench_serve_work --flow FILE --frames FILE [--runs N] "
                           "[--smoke]\n");
      return 2;
    }
  }
  if (flow_path.empty() || frames_path.empty()) {
    std::fprintf(stderr, "bench_serve_work: --flow and --frames are required\n");
    return 2;
  }
  try {
    // The body bench_bridge posts (and the plugin sends): the flow, the chat input, stream.
    auto body = R"({"flow":)" + slurp(flow_path) +
                R"(,"inputs":{"input_value":"hello","type":"chat"},"stream":true})";
    auto events = events_of(slurp(frames_path));
    if (auto r = decode<run_request>(body); !r)
      throw std::runtime_error("the request does not decode: " + r.error().message);

    size_t sink = 0; // keeps the work observable
    auto t0 = cpu_us();
    for (size_t i = 0; i < runs; ++i) {
      auto r = decode<run_request>(body);
      sink += r ? r->graph.nodes.size() : 0;
    }
    auto t1 = cpu_us();
    for (size_t i = 0; i < runs; ++i)
      for (auto& e : events) {
        auto line = encode(e);
        line += '\n';
        sink += line.size();
      }
    auto t2 = cpu_us();
    auto decode_us = (t1 - t0) / static_cast<double>(runs);
    auto encode_us = (t2 - t1) / static_cast<double>(runs);
    std::printf("serve work: the request decoded and the run's events encoded, in memory, "
                "one thread, %zu runs\n",
                runs);
    std::printf("serve work: %.1f us CPU per run (decode %.1f us for %zu bytes, %zu events "
                "encoded in %.1f us)\n",
                decode_us + encode_us, decode_us, body.size(), events.size(), encode_us);
    return sink > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_serve_work: %s\n", e.what());
    return 1;
  }
}
