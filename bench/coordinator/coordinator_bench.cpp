// bench_coordinator [--vertices N] [--runs N] [--smoke]
//
// 1. Fan-out: one run whose guest prints N vertices (vertex_start + step frames, each
//    its own stdout chunk) goes through the real coordinator → flow_run → frame
//    translation → replay buffer → subscribers, with 1, 10 and 100 subscribers attached
//    from seq 0. Prints events/s (events the run produced) and deliveries/s (events ×
//    subscribers), and the cost of 10 / 100 subscribers relative to 1.
// 2. Runs/s: R concurrent runs of a synthetic 20-vertex frame stream, one subscriber
//    each, queued and admitted by the coordinator (max inflight 64).
// The control plane is the in-process scripted one (answers at once, no guest), so the
// figures are the runtime's own overhead, not a guest's.
#include "actors/coordinator.hpp"
#include "actors/reaper.hpp"
#include "bench/load_flags.hpp"
#include "tests/unit/actors/scripted_controlplane.hpp"

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

using namespace guestflow;
using clock_type = std::chrono::steady_clock;

namespace {

/// Counts what the subscribers saw; the main thread waits for every terminal event.
struct tally {
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> errors{0};
  std::mutex mu;
  std::condition_variable cv;
  uint64_t terminals = 0;

  bool wait_for(uint64_t n, std::chrono::seconds deadline) {
    std::unique_lock<std::mutex> lock{mu};
    return cv.wait_for(lock, deadline, [&] { return terminals >= n; });
  }
};

run_subscriber_actor::behavior_type counter(run_subscriber_actor::pointer,
                                            std::shared_ptr<tally> t) {
  return {[t](const run_event& e) {
    t->events.fetch_add(1, std::memory_order_relaxed);
    if (!e.terminal()) return;
    if (e.type == run_event::kind::error) t->errors.fetch_add(1);
    {
      std::lock_guard<std::mutex> guard{t->mu};
      ++t->terminals;
    }
    t->cv.notify_all();
  }};
}

/// A guest that builds `vertices` vertices, one frame per stdout chunk, then finishes.
std::vector<exec_stream_line> frame_stream(int vertices) {
  std::vector<exec_stream_line> out;
  auto add = [&](std::string s) {
    out.push_back({exec_stream_line::kind::stdout_chunk, std::move(s) + "\n", 0});
  };
  for (int i = 0; i < vertices; ++i) {
    auto id = "Vertex-" + std::to_string(i);
    add(R"({"t":"vertex_start","id":")" + id + R"(","name":"Prompt"})");
    add(R"({"t":"step","event":{"type":"vertex","id":")" + id +
        R"(","name":"Prompt","valid":true,"duration_ms":1.5,)"
        R"("outputs":{"prompt":{"message":"Answer the question in one sentence."}},"logs":""}})");
  }
  add(R"({"t":"outputs","run_outputs":[{"inputs":{"input_value":"hi"},"outputs":[null]}]})");
  add(R"({"t":"done"})");
  return out;
}

run_request request() {
  auto r = decode<run_request>(R"({"flow":{"nodes":[{"id":"A","data":{"type":"ChatInput"}}],)"
                               R"("edges":[]},"inputs":"hi"})");
  if (!r) throw std::runtime_error(r.error().message);
  return *r;
}

struct world {
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<test::script> script = std::make_shared<test::script>();
  controlplane_actor cp;
  reaper_actor reaper;
  coordinator_actor co;

  world(int vertices, uint64_t max_inflight) {
    register_types(cfg);
    cfg.set("logger.verbosity", caf::atom("quiet"));
    sys = std::make_unique<caf::actor_system>(cfg);
    script->stream_lines = frame_stream(vertices);
    cp = sys->spawn(test::scripted_controlplane, script);
    reaper_options ro;
    ro.owner = "bench0";
    reaper = sys->spawn(guestflow::reaper, cp, ro);
    coordinator_options co_opts;
    co_opts.owner = "bench0";
    co_opts.settings.max_inflight = max_inflight;
    co_opts.run.replay_bytes = size_t{64} << 20; // the bench measures fan-out, not eviction
    co_opts.assets = {{"runner.py", "# bench"}, {"unpack_run.py", "# bench"}};
    co = sys->spawn(coordinator, cp, reaper, co_opts);
  }

  ~world() {
    caf::anon_send_exit(co, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(reaper, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(cp, caf::exit_reason::user_shutdown);
  }

  void start(const run_subscriber_actor& first) {
    caf::scoped_actor self{*sys};
    std::string err;
    self->request(co, std::chrono::seconds{60}, run_atom::value, request(), first, false)
        .receive([](std::string&) {}, [&](caf::error& e) { err = to_failure(e).message; });
    if (!err.empty()) throw std::runtime_error("start: " + err);
  }
};

/// One run with `subs` subscribers; returns (events per run, seconds).
std::pair<uint64_t, double> fan_out(int vertices, int subs) {
  world w{vertices, 1};
  auto t = std::make_shared<tally>();
  // Subscribers 2..n join while the run is held before its guest exists (the scripted
  // create answers only when released), so every one of them sees the run live.
  w.script->calls["create"] = {test::call_script::mode::hang, ec::transient, 1};
  std::vector<run_subscriber_actor> handles;
  for (int i = 0; i < subs; ++i)
    handles.push_back(w.sys->spawn(counter, t));
  caf::scoped_actor self{*w.sys};
  std::string id;
  self->request(w.co, std::chrono::seconds{60}, run_atom::value, request(), handles[0], false)
      .receive([&](std::string& x) { id = x; },
               [&](caf::error& e) { throw std::runtime_error(to_failure(e).message); });
  for (int i = 1; i < subs; ++i)
    self->request(w.co, std::chrono::seconds{60}, subscribe_atom::value, id, uint64_t{0},
                  handles[static_cast<size_t>(i)], false)
        .receive([](uint64_t) {},
                 [&](caf::error& e) { throw std::runtime_error(to_failure(e).message); });
  // The create is held by the control-plane actor; release it from there.
  auto t0 = clock_type::now();
  for (;;) {
    bool held = false;
    self->request(w.cp, std::chrono::seconds{10}, get_atom::value, std::string{"sb-1"})
        .receive([&](sandbox_view&) { held = true; }, [](caf::error&) {});
    if (held || clock_type::now() - t0 > std::chrono::seconds{10}) break;
  }
  sandbox_created made;
  made.id = "sb-1";
  auto start = clock_type::now();
  caf::anon_send(w.cp, done_atom::value, uint64_t{0}, caf::make_message(made));
  if (!t->wait_for(static_cast<uint64_t>(subs), std::chrono::seconds{600}))
    throw std::runtime_error("fan-out run did not finish within 600 s");
  auto secs = std::chrono::duration<double>(clock_type::now() - start).count();
  if (t->errors != 0) throw std::runtime_error("fan-out run ended with an error");
  for (auto& h : handles)
    caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
  return {t->events / static_cast<uint64_t>(subs), secs};
}

/// `runs` concurrent 20-vertex runs; returns seconds.
double runs_per_second(int runs) {
  world w{20, 64};
  auto t = std::make_shared<tally>();
  auto sub = w.sys->spawn(counter, t); // one subscriber for every run
  auto start = clock_type::now();
  for (int i = 0; i < runs; ++i)
    w.start(sub);
  if (!t->wait_for(static_cast<uint64_t>(runs), std::chrono::seconds{600}))
    throw std::runtime_error("runs did not finish within 600 s");
  auto secs = std::chrono::duration<double>(clock_type::now() - start).count();
  if (t->errors != 0)
    throw std::runtime_error(std::to_string(t->errors.load()) + " runs ended with an error");
  caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
  return secs;
}

} // namespace

int main(int argc, char** argv) {
  int vertices = 20'000;
  int runs = 2'000;
  auto count = [](std::string_view flag, std::string_view text) {
    return static_cast<int>(
        bench::uint_flag<uint32_t>(flag, text, 1, std::numeric_limits<int>::max()));
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--smoke") {
      vertices = 500;
      runs = 50;
    } else if (a == "--vertices" && i + 1 < argc) {
      vertices = count(a, argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = count(a, argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench_coordinator [--vertices N] [--runs N] [--smoke]\n");
      return 2;
    }
  }
  try {
    std::printf("fan-out: one run of %d vertices (%d events), scripted control plane\n",
                vertices, 2 * vertices + 1);
    std::printf("%12s %14s %16s %14s\n", "subscribers", "events/s", "deliveries/s",
                "time vs 1");
    double base = 0;
    for (int subs : {1, 10, 100}) {
      auto [events, secs] = fan_out(vertices, subs);
      if (subs == 1) base = secs;
      std::printf("%12d %14.0f %16.0f %13.2fx\n", subs, static_cast<double>(events) / secs,
                  static_cast<double>(events) * subs / secs, secs / base);
    }
    auto secs = runs_per_second(runs);
    std::printf("runs: %d runs of a 20-vertex flow, 1 subscriber each: %.0f runs/s "
                "(%.2f ms per run)\n",
                runs, runs / secs, 1000.0 * secs / runs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_coordinator: %s\n", e.what());
    return 1;
  }
  return 0;
}
