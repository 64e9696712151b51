// bench_runtime [--inflight K]... [--latency-ms N] [--smoke] [--out FILE]
//
// The runtime's own overhead per execution (issue 4, "Bench"). Starts `guestflow
// control-plane --simulate-latency-ms N` (every call answered after N ms, no guest ever
// started) as a child, builds an actor system (2 scheduler threads) and a runtime
// in-process with a client to it, then for each K launches K code executions at once
// (create → upload → exec → delete each, through the real execution actors, the reaper
// and the pooled Beast client) and measures until all K have finished:
//   runs/s, p50/p99 end-to-end latency (run sent → report received),
//   CPU of this whole process (getrusage user+sys) / K,
//   RSS: (peak while the K are in flight − before launch) / K.
// Targets: ≤ 50 µs runtime CPU per execution; ≤ 8 KiB RSS per in-flight execution at
// 10,000. Ratios are printed; the figures go to bench/results/runtime.txt (--out).
// --smoke: K = 50 and no results file, for ctest (asserts correctness, never timings).
#include "actors/code_spec.hpp"
#include "actors/guest_names.hpp"
#include "actors/runtime.hpp"
#include "actors/sandbox_policy.hpp"
#include "actors/system_settings.hpp"
#include "controlplane/client/client.hpp"
#include "messages/type_ids.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"

#include <algorithm>
#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <malloc.h>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

using namespace guestflow;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

constexpr double cpu_target_us = 50.0;
constexpr double rss_target_bytes = 8 * 1024.0;
constexpr size_t rss_target_at = 10'000;

// -- process figures ----------------------------------------------------------------------

/// Resident set size from /proc/self/statm (the same counter as VmRSS in
/// /proc/self/status, one short line to parse): cheap enough to sample every few ms.
class rss_probe {
public:
  rss_probe()
      : fd_(::open("/proc/self/statm", O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error("cannot open /proc/self/statm");
  }
  ~rss_probe() { ::close(fd_); }
  rss_probe(const rss_probe&) = delete;
  rss_probe& operator=(const rss_probe&) = delete;

  uint64_t bytes() const {
    char buf[128];
    auto n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    unsigned long long size = 0, resident = 0;
    if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
    return resident * page_;
  }

private:
  int fd_;
  uint64_t page_ = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
};

/// User and system CPU seconds of the whole process (every thread: CAF scheduler,
/// client I/O, main).
struct cpu_times {
  double user = 0, sys = 0;
  double total() const { return user + sys; }
};

cpu_times cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return {sec(ru.ru_utime), sec(ru.ru_stime)};
}

/// CPU per thread group (from /proc/self/task/*): where the process's CPU goes. Groups:
/// the main thread (the harness's waiting loop), CAF's scheduler workers and clock, and
/// the rest (the client's Asio thread and its resolver).
struct thread_cpu {
  uint64_t ns = 0;         ///< schedstat: precise
  uint64_t user_ticks = 0; ///< stat utime/stime: coarse, for the kernel share only
  uint64_t sys_ticks = 0;
};

std::map<std::string, thread_cpu> thread_cpu_by_group() {
  std::map<std::string, thread_cpu> out;
  auto self = std::to_string(::getpid());
  for (auto& e : std::filesystem::directory_iterator{"/proc/self/task"}) {
    auto tid = e.path().filename().string();
    std::ifstream comm_in{e.path() / "comm"}, sched_in{e.path() / "schedstat"},
        stat_in{e.path() / "stat"};
    std::string comm, stat;
    uint64_t ns = 0;
    if (!std::getline(comm_in, comm) || !(sched_in >> ns) || !std::getline(stat_in, stat))
      continue; // the thread ended meanwhile
    // utime and stime are fields 14 and 15; the comm (field 2) may contain spaces.
    std::istringstream fields{stat.substr(stat.rfind(')') + 2)};
    std::string skip;
    for (int i = 3; i < 14; ++i) fields >> skip;
    uint64_t utime = 0, stime = 0;
    fields >> utime >> stime;
    std::string group = tid == self                       ? "main"
                        : comm.rfind("caf.multi", 0) == 0 ? "caf-workers"
                        : comm.rfind("caf.", 0) == 0      ? "caf-other"
                                                          : "client-io";
    auto& g = out[group];
    g.ns += ns;
    g.user_ticks += utime;
    g.sys_ticks += stime;
  }
  return out;
}

/// CPU nanoseconds of every thread of process `pid` (the control plane child).
uint64_t process_cpu_ns(pid_t pid) {
  uint64_t total = 0;
  auto dir = "/proc/" + std::to_string(pid) + "/task";
  for (auto& e : std::filesystem::directory_iterator{dir}) {
    std::ifstream in{e.path() / "schedstat"};
    uint64_t ns = 0;
    if (in >> ns) total += ns;
  }
  return total;
}

/// 10,000 executions in flight are up to 10,000 concurrent connections: take the hard
/// limit (inherited by the control plane child, started afterwards).
std::string raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return "unknown";
  auto before = rl.rlim_cur;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return std::to_string(before) + " -> " + std::to_string(rl.rlim_cur) + " (hard " +
         std::to_string(rl.rlim_max) + ")";
}

// -- one batch of K executions --------------------------------------------------------------

/// What the caller supplies per run, as the `guestflow code` surface does.
struct run_inputs {
  code_request request;
  policy::sandbox_settings settings;
  policy::provider_info provider;
  shape_list catalog;
  std::string owner;
};

/// K runs: names decided up front (so a report finds its slot), times in ns since `t0`.
/// Everything here is allocated before the "before" RSS sample.
struct batch {
  explicit batch(size_t k, const std::string& owner, std::mt19937_64& rng)
      : names(k)
      , started(k, -1)
      , finished(k, -1) {
    index.reserve(k);
    for (size_t i = 0; i < k; ++i) {
      names[i] = names::ephemeral(names::guest_kind::backend, owner, rng);
      index.emplace(names[i], i);
    }
  }
  std::vector<std::string> names;
  std::unordered_map<std::string, size_t> index;
  std::vector<int64_t> started, finished;
  steady::time_point t0;
  std::atomic<size_t> done{0};
  std::atomic<size_t> failed{0};
  std::string first_error; ///< written by the driver only, read after `all_done`
  std::promise<void> all_done;
};

int64_t ns_since(steady::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - t0).count();
}

using launch_atom = caf::atom_constant<caf::atom("launch")>;

struct driver_state {
  static inline const char* name = "bench-driver";
};

/// The measuring harness, kept out of the runtime's way: one actor that spawns every
/// execution and *sends* (not requests) it its spec, so the report comes back as a plain
/// message — no response handler or timeout is held per run on the harness side. It does
/// what a surface does per run: build the spec (policy gate, shape, upload path), spawn,
/// send; then it files each report under its run's slot.
caf::behavior driver(caf::stateful_actor<driver_state>* self, runtime* rt, const run_inputs* in,
                     std::shared_ptr<batch> b) {
  auto record_failure = [b](std::string why) {
    if (b->failed.fetch_add(1) == 0) b->first_error = std::move(why);
    if (b->done.fetch_add(1) + 1 == b->names.size()) b->all_done.set_value();
  };
  // A run that fails replies with an error; to an asynchronous sender that arrives as a
  // plain error message, which CAF routes to the error handler (by default: terminate).
  self->set_error_handler(
      [record_failure](caf::error& e) { record_failure(to_failure(e).message); });
  return {
      [self, rt, in, b, record_failure](launch_atom) {
        std::mt19937_64 rng{42};
        for (size_t i = 0; i < b->names.size(); ++i) {
          auto spec = make_code_spec(in->request, in->settings, in->provider, in->catalog,
                                     b->names[i], rng);
          if (!spec) {
            record_failure("spec refused: " + spec.error().message);
            continue;
          }
          auto exec = rt->spawn_execution();
          b->started[i] = ns_since(b->t0);
          self->send(exec, run_atom::value, std::move(*spec));
        }
      },
      [b, record_failure](execution_report& r) {
        auto at = ns_since(b->t0);
        auto i = b->index.find(r.name);
        if (i == b->index.end())
          return record_failure("a report for an unknown guest name " + r.name);
        if (r.result.exit_code != 0 || r.result.error || r.outcome)
          return record_failure("run " + r.name + " exited " +
                                std::to_string(r.result.exit_code));
        b->finished[i->second] = at;
        if (b->done.fetch_add(1) + 1 == b->names.size()) b->all_done.set_value();
      },
  };
}

struct figures {
  size_t k = 0;
  size_t failed = 0;
  double wall_s = 0;
  double runs_per_s = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double cpu_us_per_run = 0;
  double sys_share = 0; ///< of cpu_us_per_run, in the kernel (loopback TCP, futexes, epoll)
  uint64_t rss_before = 0, rss_peak = 0;
  double rss_per_run = 0;
  reaper_stats reaper;
  std::map<std::string, double> cpu_us_by_thread; ///< per run
  std::map<std::string, double> sys_share_by_thread;
  double server_cpu_us_per_run = 0;               ///< the control plane child (not ours)
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

reaper_stats reaper_counters(caf::actor_system& sys, runtime& rt) {
  caf::scoped_actor self{sys};
  reaper_stats out;
  self->request(rt.reaper(), 30s, stats_atom::value)
      .receive([&](reaper_stats& s) { out = s; },
               [&](caf::error& e) {
                 throw std::runtime_error("reaper stats: " + to_failure(e).message);
               });
  return out;
}

/// Waits (deadline) until the reaper tracks nothing and owes nothing: every guest of the
/// batch was deleted and reported so.
reaper_stats settled_reaper(caf::actor_system& sys, runtime& rt) {
  auto deadline = steady::now() + 60s;
  for (;;) {
    auto s = reaper_counters(sys, rt);
    if ((s.tracked == 0 && s.pending == 0) || steady::now() > deadline) return s;
    std::this_thread::sleep_for(5ms);
  }
}

figures run_batch(caf::actor_system& sys, runtime& rt, const run_inputs& in, size_t k,
                  std::mt19937_64& rng, const rss_probe& rss, pid_t server) {
  auto b = std::make_shared<batch>(k, in.owner, rng); // shared with the driver
  auto all_done = b->all_done.get_future();
  auto drv = sys.spawn(driver, &rt, &in, b);
  // What the previous batch freed goes back to the kernel, so that this batch's growth is
  // measured from a clean floor rather than partly hidden in freed-but-resident heap.
  ::malloc_trim(0);
  figures f;
  f.k = k;
  f.rss_before = rss.bytes();
  f.rss_peak = f.rss_before;
  auto threads0 = thread_cpu_by_group();
  auto server0 = process_cpu_ns(server);
  auto cpu0 = cpu_seconds();
  b->t0 = steady::now();
  caf::anon_send(drv, launch_atom::value);
  auto deadline = b->t0 + std::chrono::seconds{60 + k / 100};
  while (all_done.wait_for(5ms) != std::future_status::ready) {
    f.rss_peak = std::max(f.rss_peak, rss.bytes());
    if (steady::now() > deadline)
      throw std::runtime_error(std::to_string(b->done.load()) + " of " + std::to_string(k) +
                               " runs finished before the deadline");
  }
  auto wall_ns = ns_since(b->t0);
  auto cpu1 = cpu_seconds();
  auto threads1 = thread_cpu_by_group();
  auto server1 = process_cpu_ns(server);
  f.rss_peak = std::max(f.rss_peak, rss.bytes());
  caf::anon_send_exit(drv, caf::exit_reason::user_shutdown);
  f.failed = b->failed.load();
  if (f.failed)
    throw std::runtime_error(std::to_string(f.failed) + " of " + std::to_string(k) +
                             " runs failed; first: " + b->first_error);
  f.wall_s = static_cast<double>(wall_ns) / 1e9;
  f.runs_per_s = static_cast<double>(k) / f.wall_s;
  std::vector<double> lat;
  lat.reserve(k);
  for (size_t i = 0; i < k; ++i)
    lat.push_back(static_cast<double>(b->finished[i] - b->started[i]) / 1e6);
  f.p50_ms = percentile(lat, 0.50);
  f.p99_ms = percentile(lat, 0.99);
  f.max_ms = lat.back();
  f.cpu_us_per_run = (cpu1.total() - cpu0.total()) * 1e6 / static_cast<double>(k);
  f.sys_share = (cpu1.sys - cpu0.sys) / (cpu1.total() - cpu0.total());
  f.server_cpu_us_per_run =
      static_cast<double>(server1 - server0) / 1e3 / static_cast<double>(k);
  for (auto& [group, t] : threads1) {
    auto& t0 = threads0[group];
    f.cpu_us_by_thread[group] =
        static_cast<double>(t.ns - t0.ns) / 1e3 / static_cast<double>(k);
    auto user = t.user_ticks - t0.user_ticks, sys = t.sys_ticks - t0.sys_ticks;
    f.sys_share_by_thread[group] =
        user + sys == 0 ? 0 : static_cast<double>(sys) / static_cast<double>(user + sys);
  }
  f.rss_per_run = static_cast<double>(f.rss_peak - f.rss_before) / static_cast<double>(k);
  f.reaper = settled_reaper(sys, rt);
  if (f.reaper.tracked != 0 || f.reaper.pending != 0)
    throw std::runtime_error("the reaper still tracks " + std::to_string(f.reaper.tracked) +
                             " guests and owes " + std::to_string(f.reaper.pending) +
                             " deletes after the batch");
  return f;
}

template<class T, class Start>
result<T> await(Start&& start) {
  auto p = std::make_shared<std::promise<result<T>>>();
  auto fut = p->get_future();
  start([p](result<T> r) { p->set_value(std::move(r)); });
  return fut.get();
}

/// The CLI's settings (actors/system_settings.hpp); `--scheduler stealing` compares with
/// CAF's default scheduler.
struct bench_config : caf::actor_system_config {
  explicit bench_config(const std::string& policy) {
    apply_runtime_settings(*this);
    if (!policy.empty()) set("scheduler.policy", caf::atom_from_string(policy));
  }
};

std::string ratio(double measured, double target) {
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%.2fx of target (%s)", measured / target,
                measured <= target ? "met" : "MISSED");
  return buf;
}

} // namespace

int main(int argc, char** argv) {
  std::vector<size_t> inflight;
  uint32_t latency_ms = 50;
  bool smoke = false;
  std::string out_path;
  std::string policy;
  size_t max_idle = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--inflight" && i + 1 < argc)
      inflight.push_back(std::stoul(argv[++i]));
    else if (a == "--latency-ms" && i + 1 < argc)
      latency_ms = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (a == "--smoke")
      smoke = true;
    else if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else if (a == "--scheduler" && i + 1 < argc)
      policy = argv[++i];
    else if (a == "--max-idle" && i + 1 < argc)
      max_idle = std::stoul(argv[++i]);
    else {
      std::cerr << "usage: bench_runtime [--inflight K]... [--latency-ms N] [--smoke] "
                   "[--out FILE]\n";
      return 2;
    }
  }
  if (inflight.empty())
    inflight = smoke ? std::vector<size_t>{50} : std::vector<size_t>{1000, 10'000};
  if (out_path.empty() && !smoke)
    out_path = std::string{GUESTFLOW_SOURCE_DIR} + "/bench/results/runtime.txt";

  try {
    auto fd_limit = raise_fd_limit();
    guestflow::testing::temp_dir dir;
    guestflow::testing::control_plane_process server{
        dir.path() / "state", {"--simulate-latency-ms", std::to_string(latency_ms)}};
    cp::endpoint ep;
    ep.base_url = "http://127.0.0.1:" + std::to_string(server.port());
    cp::client_config ccfg; // the CLI's defaults
    if (max_idle) ccfg.max_idle_per_endpoint = max_idle;
    auto client = cp::client::make(ep, ccfg);
    if (!client) throw std::runtime_error("client: " + client.error().message);

    run_inputs in;
    in.request.code = "print('hello from a guest')\n";
    in.provider.kind = cp::provider::local;
    auto caps = await<capabilities>([&](auto cb) { (*client)->capabilities_of(10s, cb); });
    if (!caps) throw std::runtime_error("capabilities: " + caps.error().message);
    in.provider.caps = *caps;
    auto catalog = await<shape_list>([&](auto cb) { (*client)->shapes(10s, cb); });
    if (!catalog) throw std::runtime_error("shapes: " + catalog.error().message);
    in.catalog = std::move(*catalog);
    in.owner = names::owner_id("benchrt", "bench", dir.path().string());

    bench_config cfg{policy};
    caf::actor_system sys{cfg};
    runtime_options ro;
    ro.owner = in.owner;
    runtime rt{sys, std::move(*client), ro};
    std::mt19937_64 rng{7};
    rss_probe rss;

    // Warm-up: code paths, thread stacks, pool and allocator arenas, not measured.
    run_batch(sys, rt, in, std::min<size_t>(200, inflight.front()), rng, rss, server.pid());

    std::vector<figures> all;
    for (auto k : inflight)
      all.push_back(run_batch(sys, rt, in, k, rng, rss, server.pid()));

    std::ostringstream table;
    table << "runtime overhead per execution: simulated control plane, " << latency_ms
          << " ms per call, 4 calls per run (create, upload, exec, delete)\n"
          << "this process: actor system 2 threads, scheduler "
          << (policy.empty() ? std::string{"sharing (runtime default)"} : policy)
          << ", client 1 I/O thread, pool max idle " << ccfg.max_idle_per_endpoint
          << "; fd limit " << fd_limit << "; " << std::thread::hardware_concurrency()
          << " cores shared with the control plane child\n\n";
    char line[256];
    std::snprintf(line, sizeof(line), "%8s %8s %9s %9s %11s %7s %11s %11s\n", "inflight",
                  "runs/s", "p50 ms", "p99 ms", "CPU us/run", "kernel", "RSS B/run",
                  "cp CPU us");
    table << line;
    for (auto& f : all) {
      std::snprintf(line, sizeof(line), "%8zu %8.0f %9.1f %9.1f %11.1f %6.0f%% %11.0f %11.1f\n",
                    f.k, f.runs_per_s, f.p50_ms, f.p99_ms, f.cpu_us_per_run, 100 * f.sys_share,
                    f.rss_per_run, f.server_cpu_us_per_run);
      table << line;
    }
    table
        << "(CPU: this process, getrusage user+sys / K; RSS: (peak - before) / K; cp CPU: the\n"
           " control plane child per run, not counted. Ideal latency 4 x "
        << latency_ms << " ms = " << 4 * latency_ms
        << " ms; above it, both processes are CPU-bound on these cores.)\n\n";
    for (auto& f : all) {
      std::snprintf(line, sizeof(line), "%.1f us", f.cpu_us_per_run);
      table << "target CPU per execution <= " << cpu_target_us << " us, at " << f.k << ": "
            << line << " = " << ratio(f.cpu_us_per_run, cpu_target_us) << "\n";
    }
    bool rss_measured = false;
    for (auto& f : all) {
      if (f.k != rss_target_at) continue;
      rss_measured = true;
      std::snprintf(line, sizeof(line), "%.0f B", f.rss_per_run);
      table << "target RSS per in-flight execution <= " << rss_target_bytes << " B, at " << f.k
            << ": " << line << " = " << ratio(f.rss_per_run, rss_target_bytes) << "\n";
    }
    if (!rss_measured)
      table << "target RSS (at " << rss_target_at << " in flight): not measured in this run\n";
    table << "\nCPU us/run by thread (main = this harness's sampling loop), with the kernel's\n"
             "share of it (from 10 ms ticks, coarse):\n";
    for (auto& f : all) {
      table << "  " << f.k << ":";
      for (auto& [group, us] : f.cpu_us_by_thread) {
        std::snprintf(line, sizeof(line), " %s %.1f (%.0f%%)", group.c_str(), us,
                      100 * f.sys_share_by_thread[group]);
        table << line;
      }
      table << "\n";
    }
    std::ostringstream raw;
    raw << "\nraw:\n";
    for (auto& f : all) {
      raw << "inflight=" << f.k << " wall_s=" << f.wall_s << " runs_per_s=" << f.runs_per_s
          << " p50_ms=" << f.p50_ms << " p99_ms=" << f.p99_ms << " max_ms=" << f.max_ms
          << " cpu_us_per_run=" << f.cpu_us_per_run << " sys_share=" << f.sys_share
          << " rss_before=" << f.rss_before << " rss_peak=" << f.rss_peak
          << " rss_per_inflight=" << f.rss_per_run << " reaper_created=" << f.reaper.created
          << " reaper_deleted=" << f.reaper.deleted
          << " failed_deletes=" << f.reaper.failed_deletes
          << " cp_cpu_us_per_run=" << f.server_cpu_us_per_run << "\n";
    }
    std::cout << table.str() << raw.str() << std::flush;
    if (!out_path.empty()) {
      std::ofstream out{out_path};
      out << table.str() << raw.str();
      if (!out) throw std::runtime_error("cannot write " + out_path);
      std::cout << "(written to " << out_path << ")\n";
    }

    // The reaper owes nothing (checked per batch); stop the runtime before the server.
    rt.stop();
    return server.stop() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_runtime: " << e.what() << '\n';
    return 1;
  }
}
