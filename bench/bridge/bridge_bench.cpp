// bench_bridge [--streams N]... [--duration-s S] [--warmup-s S] [--latency-ms N] [--settle-s S]
//              [--env K=V]... [--flow FILE] [--frames FILE] [--real] [--no-baseline]
//              [--transport tcp|unix] [--server-cpu N] [--smoke] [--out FILE]
//
// The bridge's HTTP surface under load. Starts `guestflow control-plane
// --simulate-latency-ms N --simulate-exec-stdout bench/bridge/prompt_frames.ndjson` (every
// call answered after N ms, no guest started; every exec prints what the real runner
// printed for examples/flows/prompt.json: 3 vertices, so 7 events per run ending with
// `complete`), then `guestflow serve` against it (its own GUESTFLOW_STATE_DIR), and for
// each N drives `POST /v1/runs` (stream: true, examples/flows/prompt.json) from N
// keep-alive connections in a closed loop, reading each NDJSON stream to its terminal
// event (load_client: Beast, one I/O thread). Per N, over the measured window:
//   runs/s, p50/p99 latency (request written → terminal event read) and their ratio to the
//   ideal (control-plane calls per run × N ms; calls counted by the server's /metrics, or
//   while it has no call count, estimated from the 1-stream latency),
//   the server's CPU per run (/proc/PID/stat utime+stime) and peak RSS, events/s, errors
//   (429s, error events, transport failures, protocol breaches) — all of them printed.
// A row at 1 stream first gives the unloaded latency. --smoke: 20 streams for 2 s at 5 ms,
// no results file, asserts correctness only (every run ended with exactly one terminal
// event, `complete`, after the canned events; seq gapless; the server stops cleanly).
// --flow/--frames: another flow and its canned frames (bench/flowfarm makes 1-, 5- and
// 20-vertex ones); --real: a control plane that starts real local guests (root; the frames
// are the real runner's, their count unchecked); --no-baseline: no 1-stream row first.
// --transport unix: the server reaches the control plane over its --unix-socket (the
// one-host deployment the README recommends) instead of loopback TCP.
// --server-cpu N: every thread of the server pinned to CPU N (the control plane and this
// generator left free): the difference against an unpinned run is what the hand-offs
// between the server's threads cost in wake-ups of another CPU (bench/README.md, "Hand-offs
// across CPUs").
// Each level's `raw:` line is what bench/run reads.
#include "bench/bridge/load_client.hpp"
#include "bench/load_flags.hpp"
#include "bench/pin_threads.hpp"
#include "bench/summary.hpp"
#include "common/fd_limit.hpp"
#include "messages/jsend.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/support/slurp.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace guestflow;
using namespace guestflow::bench;
using namespace std::chrono_literals;

namespace {

const std::string source_dir = GUESTFLOW_SOURCE_DIR;

/// The whole file; a bench input that cannot be read (or is empty) stops the bench.
std::string slurp(const std::string& path) {
  auto text = test_support::slurp(path);
  if (text.empty()) throw std::runtime_error("cannot read " + path + " (or it is empty)");
  return text;
}

/// Events one run yields from the canned frames (vertex_start, step, stdout frames), plus
/// its terminal `complete`.
size_t expected_events(const std::string& frames) {
  size_t n = 1;
  std::istringstream in{frames};
  for (std::string line; std::getline(in, line);) {
    auto f = decode_frame(line);
    if (!f) throw std::runtime_error("canned frame file: " + f.error().message);
    using k = guest_frame::kind;
    n += f->type == k::vertex_start || f->type == k::step || f->type == k::stdout_line;
  }
  return n;
}

// -- the server process's figures ---------------------------------------------------------

/// utime + stime of `pid` (all its threads) in seconds, from /proc/PID/stat.
double process_cpu_seconds(pid_t pid) {
  auto stat = slurp("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')'); // the command name may hold spaces
  std::istringstream in{stat.substr(close + 2)};
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) { // fields 14 and 15 (1-based)
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

/// utime + stime seconds of each live thread of `pid`, as "name/tid": where the server's
/// CPU goes (CAF's threads, its HTTP I/O thread, the control-plane client's…).
std::map<std::string, double> thread_cpu_seconds(pid_t pid) {
  std::map<std::string, double> out;
  auto tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  for (auto& e :
       std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/task"}) {
    std::ifstream in{e.path() / "stat"};
    std::string stat{std::istreambuf_iterator<char>{in}, {}};
    auto open = stat.find('('), close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue; // ended meanwhile
    std::istringstream fields{stat.substr(close + 2)};
    std::string field;
    unsigned long long utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    auto tid = e.path().filename().string();
    auto name = tid == std::to_string(pid) ? std::string{"main"}
                                           : stat.substr(open + 1, close - open - 1);
    out[name + "/" + tid] += static_cast<double>(utime + stime) / tick;
  }
  return out;
}

/// VmRSS of `pid` in bytes.
uint64_t process_rss(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/status"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  return 0;
}

/// The counters this bench reads from `GET /metrics` (absent ones stay 0).
struct server_counters {
  double cp_calls = 0;      ///< guestflow_controlplane_call_seconds_count
  double runs_finished = 0; ///< guestflow_runs_finished_total
  std::string text;
};

server_counters scrape(uint16_t port) {
  server_counters c;
  auto r = testing::http_client{port}.call("GET", "/metrics", {}, {}, 30s);
  if (r.status != 200) throw std::runtime_error("GET /metrics: " + std::to_string(r.status));
  c.text = r.body;
  std::istringstream in{r.body};
  for (std::string line; std::getline(in, line);) {
    auto sp = line.rfind(' ');
    if (line.empty() || line[0] == '#' || sp == std::string::npos) continue;
    auto name = line.substr(0, sp);
    double v = std::strtod(line.c_str() + sp + 1, nullptr);
    if (name == "guestflow_controlplane_call_seconds_count") c.cp_calls = v;
    if (name == "guestflow_runs_finished_total") c.runs_finished = v;
  }
  return c;
}

/// The control plane's guest counts (GET /v1/whoami).
whoami live_guests(uint16_t cp_port) {
  auto r = testing::http_client{cp_port}.call("GET", "/v1/whoami", {}, {}, 30s);
  auto env = decode<jsend>(r.body);
  if (r.status != 200 || !env) throw std::runtime_error("control plane whoami: " + r.body);
  auto w = decode<whoami>(env->data.text);
  if (!w) throw std::runtime_error("control plane whoami: " + w.error().message);
  return *w;
}

// -- one level ----------------------------------------------------------------------------

struct figures {
  size_t streams = 0;
  double window_s = 0;
  size_t runs = 0;      ///< requests that ended in the window
  size_t completed = 0; ///< of which `complete`
  double runs_per_s = 0, events_per_s = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
  double first_p50_ms = 0;  ///< request written → first event read
  double server_cpu_us = 0; ///< per completed run
  double cp_cpu_us = 0;     ///< the control plane child, per completed run
  double client_cpu_us = 0; ///< this generator's I/O thread, per completed run
  std::map<std::string, double> server_threads_us; ///< "name/tid" → per completed run
  uint64_t server_rss_idle = 0;                    ///< before the level's first request
  uint64_t server_rss_before = 0, server_rss_peak = 0;
  uint64_t server_rss_settled = 0; ///< after --settle-s idle (0: not measured)
  size_t requests_total = 0;       ///< whole level, warm-up and drain included
  size_t errors_total = 0, http_429 = 0, violations = 0, unfinished = 0;
  /// category → count and its first full message (whole level)
  std::map<std::string, std::pair<size_t, std::string>> errors;
};

/// The error's category: `http 429 capacity`, `event error timeout`, `transport: read
/// stream: …`, `protocol: …` (cut, so that per-run details rarely split a category).
std::string category(const std::string& error) {
  if (error.rfind("event error", 0) == 0) return error.substr(0, error.find(':'));
  return error.substr(0, 64);
}

figures run_level(const load_target& target, size_t streams, std::chrono::milliseconds warmup,
                  std::chrono::milliseconds window, pid_t server, pid_t cp) {
  figures f;
  f.streams = streams;
  auto t0 = steady::now();
  auto w0 = t0 + warmup, w1 = w0 + window;
  f.server_rss_idle = process_rss(server);
  // Requests go on a little past the window, so that the load is steady while the window's
  // figures are sampled at its end.
  load_generator gen{target, streams, w1 + 500ms};
  std::this_thread::sleep_until(w0); // the window's start: a measurement, not readiness
  auto server0 = process_cpu_seconds(server);
  auto threads0 = thread_cpu_seconds(server);
  auto cp0 = process_cpu_seconds(cp);
  auto client0 = gen.io_thread_cpu_seconds();
  f.server_rss_before = process_rss(server);
  f.server_rss_peak = f.server_rss_before;
  while (steady::now() < w1) {
    std::this_thread::sleep_for(std::min<steady::duration>(50ms, w1 - steady::now()));
    f.server_rss_peak = std::max(f.server_rss_peak, process_rss(server));
  }
  auto server1 = process_cpu_seconds(server);
  auto threads1 = thread_cpu_seconds(server);
  auto cp1 = process_cpu_seconds(cp);
  auto client1 = gen.io_thread_cpu_seconds();
  auto result = gen.finish(std::chrono::seconds{60 + streams / 10});

  f.window_s = std::chrono::duration<double>(window).count();
  f.unfinished = result.unfinished;
  std::vector<double> lat, first;
  uint64_t events = 0;
  for (const auto& r : result.runs) {
    ++f.requests_total;
    if (!r.error.empty()) {
      ++f.errors_total;
      auto& [n, example] = f.errors[category(r.error)];
      if (n++ == 0) example = r.error;
      f.http_429 += r.status == 429;
      f.violations += r.protocol_violation;
    }
    if (r.end < w0 || r.end >= w1) continue;
    ++f.runs;
    events += r.events;
    if (!r.error.empty()) continue;
    ++f.completed;
    if (r.start < w0) continue;
    lat.push_back(std::chrono::duration<double, std::milli>(r.end - r.start).count());
    first.push_back(std::chrono::duration<double, std::milli>(r.first - r.start).count());
  }
  f.runs_per_s = static_cast<double>(f.completed) / f.window_s;
  f.events_per_s = static_cast<double>(events) / f.window_s;
  f.p50_ms = percentile(lat, 0.50);
  f.p95_ms = percentile(lat, 0.95);
  f.p99_ms = percentile(lat, 0.99);
  f.max_ms = lat.empty() ? 0 : *std::max_element(lat.begin(), lat.end());
  f.first_p50_ms = percentile(first, 0.50);
  auto per_run = [&](double seconds) {
    return f.completed ? seconds * 1e6 / static_cast<double>(f.completed) : 0.0;
  };
  f.server_cpu_us = per_run(server1 - server0);
  f.cp_cpu_us = per_run(cp1 - cp0);
  f.client_cpu_us = per_run(client1 - client0);
  for (auto& [name, seconds] : threads1)
    f.server_threads_us[name] = per_run(seconds - threads0[name]);
  return f;
}

/// The level's errors as `category:count,…` (spaces as `_`; `-` for none): one token of
/// the raw line.
std::string errors_by(const figures& f) {
  std::string out;
  for (auto& [what, seen] : f.errors) {
    auto key = what;
    for (auto& c : key)
      if (c == ' ' || c == ',' || c == '=') c = '_';
    out += (out.empty() ? "" : ",") + key + ":" + std::to_string(seen.first);
  }
  return out.empty() ? "-" : out;
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(b) / 1e6);
  return buf;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<size_t> levels;
  double duration_s = 10, warmup_s = 3, settle_s = 0;
  uint32_t latency_ms = 50;
  bool smoke = false, real = false, baseline = true, unix_socket = false;
  std::string out_path;
  std::string frames_path = source_dir + "/bench/bridge/prompt_frames.ndjson";
  std::string flow_path = source_dir + "/examples/flows/prompt.json";
  std::map<std::string, std::string> extra_env;
  std::optional<int> server_cpu;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--streams" && i + 1 < argc)
      levels.push_back(uint_flag<size_t>(a, argv[++i], 1));
    else if (a == "--duration-s" && i + 1 < argc)
      duration_s = std::stod(argv[++i]);
    else if (a == "--warmup-s" && i + 1 < argc)
      warmup_s = std::stod(argv[++i]);
    else if (a == "--settle-s" && i + 1 < argc)
      settle_s = std::stod(argv[++i]);
    else if (a == "--latency-ms" && i + 1 < argc)
      latency_ms = uint_flag<uint32_t>(a, argv[++i]);
    else if (a == "--env" && i + 1 < argc &&
             std::string{argv[i + 1]}.find('=') != std::string::npos) {
      std::string kv = argv[++i];
      extra_env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    } else if (a == "--smoke")
      smoke = true;
    else if (a == "--flow" && i + 1 < argc)
      flow_path = argv[++i];
    else if (a == "--frames" && i + 1 < argc)
      frames_path = argv[++i];
    else if (a == "--real")
      real = true;
    else if (a == "--no-baseline")
      baseline = false;
    else if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else if (a == "--transport" && i + 1 < argc &&
             (std::string{argv[i + 1]} == "unix" || std::string{argv[i + 1]} == "tcp"))
      unix_socket = std::string{argv[++i]} == "unix";
    else if (a == "--server-cpu" && i + 1 < argc)
      server_cpu = static_cast<int>(uint_flag<uint32_t>(a, argv[++i], 0, CPU_SETSIZE - 1));
    else {
      std::cerr << "usage: bench_bridge [--streams N]... [--duration-s S] [--warmup-s S] "
                   "[--latency-ms N] [--env K=V]... [--settle-s S] [--flow FILE] "
                   "[--frames FILE] [--real] [--no-baseline] [--transport tcp|unix] "
                   "[--server-cpu N] [--smoke] [--out FILE]\n";
      return 2;
    }
  }
  if (smoke) {
    if (levels.empty()) levels = {20};
    duration_s = 2;
    warmup_s = 0.5;
    latency_ms = 5;
  }
  if (levels.empty()) levels = {100, 1000};
  if (out_path.empty() && !smoke) out_path = source_dir + "/bench/results/bridge.txt";

  try {
    auto fd_limit = raise_fd_limit(); // 1,000 streams: sockets here and in the server
    load_target target;
    target.expected_events = real ? 0 : expected_events(slurp(frames_path));
    target.body = R"({"flow":)" + slurp(flow_path) +
                  R"(,"inputs":{"input_value":"hello","type":"chat"},"stream":true})";

    test_support::temp_dir dir{"guestflow-bench"};
    std::vector<std::string> cp_args{"--simulate-latency-ms", std::to_string(latency_ms),
                                     "--simulate-exec-stdout", frames_path};
    if (real) cp_args.clear(); // real guests: the control plane's own defaults
    auto socket_path = (dir.path() / "cp.sock").string();
    if (unix_socket) {
      cp_args.push_back("--unix-socket");
      cp_args.push_back(socket_path);
    }
    testing::control_plane_process cp{dir.path() / "cp-state", cp_args};
    for (auto until = std::chrono::steady_clock::now() + 10s;
         unix_socket && !std::filesystem::exists(socket_path);)
      if (std::chrono::steady_clock::now() > until)
        throw std::runtime_error("the control plane made no socket at " + socket_path);
      else
        std::this_thread::sleep_for(10ms); // polled with a deadline: it binds after printing
    // The child's environment is ours plus these; an empty value counts as unset.
    std::map<std::string, std::string> env{
        {"GUESTFLOW_CONTROL_PLANE_URL", unix_socket
                                            ? "unix://" + socket_path
                                            : "http://127.0.0.1:" + std::to_string(cp.port())},
        {"GUESTFLOW_CONTROL_PLANE_KEY", ""},
        {"GUESTFLOW_TOKEN", ""},
        {"GUESTFLOW_STATE_DIR", (dir.path() / "serve-state").string()}};
    for (auto& [k, v] : extra_env)
      env[k] = v;
    std::filesystem::create_directories(dir.path() / "serve-state");
    testing::control_plane_process server{
        {"serve", "--listen", "127.0.0.1:0"}, env, dir.path() / "serve.stderr"};
    target.port = server.port();
    if (server_cpu) bench::pin_threads(server.pid(), *server_cpu);

    auto warmup = std::chrono::milliseconds{static_cast<int64_t>(warmup_s * 1000)};
    auto window = std::chrono::milliseconds{static_cast<int64_t>(duration_s * 1000)};
    std::vector<figures> all;
    if (!smoke && baseline) // the unloaded latency, one run at a time
      all.push_back(
          run_level(target, 1, 500ms, std::min(window, 3000ms), server.pid(), cp.pid()));
    for (auto n : levels) {
      all.push_back(run_level(target, n, warmup, window, server.pid(), cp.pid()));
      // --settle-s: the server's RSS once idle that long after the level (finished runs
      // are retained for late joiners for a while: is the memory given back, or reused?).
      if (settle_s <= 0) continue;
      std::this_thread::sleep_for(
          std::chrono::milliseconds{static_cast<int64_t>(settle_s * 1000)});
      all.back().server_rss_settled = process_rss(server.pid());
    }
    auto final_metrics = scrape(server.port());
    // Waited past serve's own stop bound (GUESTFLOW_SHUTDOWN_SECONDS, 30 s by default): a
    // stop that needs all of it then exits with its own word (125) instead of this
    // harness's SIGKILL at the same moment.
    auto server_exit = server.stop(std::chrono::seconds{45});
    auto server_stderr = server.stderr_text();
    auto guests = live_guests(cp.port()); // every guest the server asked for is deleted
    auto cp_exit = cp.stop();

    // Control-plane calls per run: counted by the server (its /metrics call histogram over
    // every run since it started; the flow never changes), else estimated from the
    // unloaded latency at 1 stream (whole calls of `latency_ms` that fit in its p50).
    double calls = final_metrics.runs_finished > 0
                       ? final_metrics.cp_calls / final_metrics.runs_finished
                       : 0;
    std::string calls_source = "server /metrics: calls / runs finished";
    if (calls == 0 && !all.empty() && all.front().streams == 1 && latency_ms > 0) {
      calls = std::floor(all.front().p50_ms / latency_ms);
      calls_source = "estimated: floor(p50 at 1 stream / latency), /metrics has no call count";
    }
    double ideal_ms = calls * latency_ms;

    std::ostringstream table;
    table << "bridge: POST /v1/runs (stream: true, " << flow_path
          << ") from N keep-alive\n"
             "connections in a closed loop (one Beast I/O thread), to `guestflow serve` on "
          << (real ? std::string{"a control plane starting real local guests.\n"}
                   : "the\nsimulated control plane: " + std::to_string(latency_ms) +
                         " ms per call, exec prints " + frames_path + " (" +
                         std::to_string(target.expected_events) +
                         " events per run, ending with complete).\n")
          << "control-plane calls per run: ";
    char line[320];
    std::snprintf(line, sizeof(line), "%.2f", calls);
    table << (calls > 0 ? std::string{line} + " (" + calls_source + ")"
                        : std::string{"unknown"})
          << "; ideal latency "
          << (calls > 0 ? std::to_string(static_cast<int>(ideal_ms + 0.5)) + " ms" : "unknown")
          << "; server to control plane over "
          << (unix_socket ? "its Unix socket" : "loopback TCP") << "; window " << duration_s
          << " s after " << warmup_s << " s warm-up; fd limit " << fd_limit << "; "
          << std::thread::hardware_concurrency()
          << " cores shared by server, control plane and this generator"
          << (server_cpu ? "; the server's threads pinned to CPU " + std::to_string(*server_cpu)
                         : std::string{})
          << "\n";
    if (!extra_env.empty()) {
      table << "server env:";
      for (auto& [k, v] : extra_env)
        table << " " << k << "=" << v;
      table << "\n";
    }
    table << "\n";
    std::snprintf(line, sizeof(line), "%7s %8s %8s %8s %9s %9s %12s %10s %9s %7s %6s\n",
                  "streams", "runs/s", "p50 ms", "p99 ms", "p50/ideal", "p99/ideal",
                  "srv CPU us/run", "srv RSS", "events/s", "errors", "429s");
    table << line;
    for (auto& f : all) {
      auto ratio = [&](double ms) { return ideal_ms > 0 ? ms / ideal_ms : 0.0; };
      std::snprintf(line, sizeof(line),
                    "%7zu %8.0f %8.1f %8.1f %8.2fx %8.2fx %12.0f %10s %9.0f %7zu %6zu\n",
                    f.streams, f.runs_per_s, f.p50_ms, f.p99_ms, ratio(f.p50_ms),
                    ratio(f.p99_ms), f.server_cpu_us, human_bytes(f.server_rss_peak).c_str(),
                    f.events_per_s, f.errors_total, f.http_429);
      table << line;
    }
    for (auto& f : all) // /proc's CPU times count in clock ticks
      if (f.completed && f.server_cpu_us > 0) {
        auto tick_us = 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK)) /
                       static_cast<double>(f.completed);
        if (tick_us > 0.05 * f.server_cpu_us) {
          std::snprintf(line, sizeof(line),
                        "(at %zu streams, CPU per run is +-%.0f us: one clock tick over %zu "
                        "runs)\n",
                        f.streams, tick_us, f.completed);
          table << line;
        }
      }
    table << "(runs/s, events/s, latency: runs that ended in the window, latency from request "
             "written to\n terminal event read; srv CPU: the serve process's utime+stime over "
             "the window / complete runs;\n srv RSS: its peak VmRSS in the window; errors and "
             "429s: every request of the level, warm-up\n and drain included.)\n\n";
    table << "CPU per complete run, other processes (same cores): control plane / this "
             "generator's I/O thread\n";
    for (auto& f : all) {
      std::snprintf(line, sizeof(line), "  %zu streams: cp %.0f us, client %.0f us\n",
                    f.streams, f.cp_cpu_us, f.client_cpu_us);
      table << line;
    }
    table << "server CPU us per complete run by thread (name/tid; threads over 2% of it):\n";
    for (auto& f : all) {
      table << "  " << f.streams << " streams:";
      size_t shown = 0;
      for (auto& [name, us] : f.server_threads_us) {
        if (us < 0.02 * f.server_cpu_us) continue;
        ++shown;
        std::snprintf(line, sizeof(line), " %s %.0f", name.c_str(), us);
        table << line;
      }
      if (shown == 0) table << " (each under one clock tick)";
      table << "\n";
    }
    bool clean = server_exit == 0 && cp_exit == 0 && guests.running == 0 && guests.paused == 0;
    for (auto& f : all) {
      clean = clean && f.errors_total == 0 && f.unfinished == 0 && f.completed > 0;
      if (f.errors.empty() && f.unfinished == 0) continue;
      table << "errors at " << f.streams << " streams (" << f.errors_total << " of "
            << f.requests_total << " requests; " << f.unfinished
            << " connections unfinished at the drain deadline):\n";
      for (auto& [what, seen] : f.errors)
        table << "  " << seen.first << " x " << what
              << (seen.second != what ? "  (first: " + seen.second + ")" : std::string{})
              << "\n";
    }
    for (auto& f : all)
      if (f.server_rss_settled)
        table << "server RSS " << settle_s << " s after the " << f.streams
              << "-stream level: " << human_bytes(f.server_rss_settled) << " ("
              << f.requests_total << " requests in the level)\n";
    table << "\nserver exit " << server_exit << ", control plane exit " << cp_exit
          << "; guests on the control plane after the server stopped: " << guests.running
          << " running, " << guests.paused << " paused; server counters at the end:\n";
    std::istringstream metrics{final_metrics.text};
    for (std::string m; std::getline(metrics, m);) {
      bool zero_outcome = m.rfind("guestflow_runs_total{", 0) == 0 && m.size() > 2 &&
                          m.compare(m.size() - 2, 2, " 0") == 0;
      if (!zero_outcome &&
          (m.rfind("guestflow_runs_", 0) == 0 || m.rfind("guestflow_guests_", 0) == 0))
        table << "  " << m << "\n";
    }

    std::ostringstream raw;
    raw << "\nraw:\n";
    for (auto& f : all)
      raw << "streams=" << f.streams << " window_s=" << f.window_s << " runs=" << f.runs
          << " completed=" << f.completed << " runs_per_s=" << f.runs_per_s
          << " p50_ms=" << f.p50_ms << " p95_ms=" << f.p95_ms << " p99_ms=" << f.p99_ms
          << " max_ms=" << f.max_ms << " first_event_p50_ms=" << f.first_p50_ms
          << " server_cpu_us_per_run=" << f.server_cpu_us
          << " cp_cpu_us_per_run=" << f.cp_cpu_us
          << " client_cpu_us_per_run=" << f.client_cpu_us
          << " server_rss_idle=" << f.server_rss_idle
          << " server_rss_before=" << f.server_rss_before
          << " server_rss_peak=" << f.server_rss_peak
          << " server_rss_settled=" << f.server_rss_settled << " requests=" << f.requests_total
          << " errors=" << f.errors_total << " http_429=" << f.http_429
          << " violations=" << f.violations << " unfinished=" << f.unfinished
          << " errors_by=" << errors_by(f) << "\n";
    raw << "end: server_exit=" << server_exit << " cp_exit=" << cp_exit
        << " guests_left_running=" << guests.running << " guests_left_paused=" << guests.paused
        << "\n";
    std::cout << table.str() << raw.str() << std::flush;
    if (!out_path.empty()) {
      std::ofstream out{out_path};
      out << table.str() << raw.str();
      if (!out) throw std::runtime_error("cannot write " + out_path);
      std::cout << "(written to " << out_path << ")\n";
    }
    if (!clean && !server_stderr.empty()) {
      auto tail = server_stderr.size() > 4000
                      ? server_stderr.substr(server_stderr.size() - 4000)
                      : server_stderr;
      std::cerr << "server stderr (tail):\n" << tail << "\n";
    }
    if (smoke && !clean) {
      std::cerr << "bench_bridge --smoke: FAILED (see errors above)\n";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_bridge: " << e.what() << '\n';
    return 1;
  }
}
