// bench_actor_floor [--inflight K]... [--latency-ms N] [--rounds R] [--smoke]
//
// The third floor under bench_runtime's CPU per execution, beside bench_round_trip_floor
// (the round trips) and bench_call_work (their HTTP and JSON): the least that one CAF actor
// per execution costs, with the runtime's CAF settings (apply_runtime_settings: its workers,
// the sharing scheduler) and allocator. Each run is one actor that makes a code run's 4
// calls (create, upload, exec, delete) on bench::answering_client itself (no control-plane
// actor between, no request timeouts), gets each answer as one message in its mailbox from
// the client's thread (as the runtime's executions get theirs), and quits after the
// fourth, launching the next run (sustained: K in flight). No spec, reaper, monitor or
// caller: spawn, 4 calls, 4 messages, exit. Printed per K: CPU per run of CAF's threads
// (workers and clock) and, apart, of the answering thread, which stands in for the
// client's I/O thread that the other two floors price.
// --smoke: K = 50, one round, for ctest (asserts that every run finishes, never timings).
#include "actors/system_settings.hpp"
#include "bench/load_flags.hpp"
#include "bench/runtime/answering_client.hpp"
#include "bench/thread_cpu.hpp"
#include "messages/type_ids.hpp"

#include <atomic>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <chrono>
#include <cstdio>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

using namespace guestflow;
using namespace std::chrono_literals;

namespace {

/// One load: runs launched and finished, shared by every run's actor.
struct load {
  std::shared_ptr<cp::client> client;
  size_t total = 0;
  std::atomic<size_t> launched{0};
  std::atomic<size_t> done{0};
  std::atomic<size_t> failed{0};
  std::promise<void> all_done;
};

/// The answer of one call, as one message to `run` (the runtime's reply_to does the same).
template<class T>
cp::callback<T> answer_to(caf::actor run) {
  return [run = std::move(run)](result<T> r) {
    if (r)
      caf::anon_send(run, std::move(*r));
    else
      caf::anon_send(run, make_error(r.error().code, std::move(r).error().message));
  };
}

void launch(caf::actor_system& sys, const std::shared_ptr<load>& l);

caf::behavior run(caf::event_based_actor* self, std::shared_ptr<load> l) {
  sandbox_create_request req;
  req.shape = "small";
  req.name = "gf-b-bench00-" + std::to_string(l->launched.load());
  req.auto_pause_after_seconds = 150;
  l->client->create(req, 30s, answer_to<sandbox_created>(caf::actor_cast<caf::actor>(self)));
  auto end = [self, l](bool ok) {
    if (!ok) ++l->failed;
    launch(self->home_system(), l);
    if (l->done.fetch_add(1) + 1 == l->total) l->all_done.set_value();
    self->quit();
  };
  auto id = std::make_shared<std::string>();
  return {
      [self, l, id](sandbox_created& c) {
        *id = std::move(c.id);
        l->client->put_file(*id, "/workspace/main_0123456789abcdef.py",
                            "print('hello from a guest')\n", 30s,
                            answer_to<bool>(caf::actor_cast<caf::actor>(self)));
      },
      [self, l, id](bool) {
        exec_request cmd{"timeout", {"--signal=KILL", "30", "python3", "/workspace/main.py"}};
        l->client->exec(*id, cmd, 60s,
                        answer_to<exec_result>(caf::actor_cast<caf::actor>(self)));
      },
      [self, l, id](exec_result&) {
        l->client->remove(*id, 30s,
                          answer_to<sandbox_deleted>(caf::actor_cast<caf::actor>(self)));
      },
      [end](sandbox_deleted&) { end(true); },
      [end](caf::error&) { end(false); },
  };
}

void launch(caf::actor_system& sys, const std::shared_ptr<load>& l) {
  if (l->launched.fetch_add(1) < l->total) sys.spawn(run, l);
}

struct figures {
  size_t k = 0;
  double runs_per_s = 0;
  double caf_us = 0;    ///< workers + clock, per run
  double clock_us = 0;  ///< of which the clock
  double client_us = 0; ///< the answering thread, per run
};

struct sample {
  std::chrono::steady_clock::time_point at;
  size_t done = 0;
  std::map<std::string, bench::thread_cpu> threads;
};

figures measure(caf::actor_system& sys, size_t k, size_t rounds,
                std::chrono::milliseconds latency) {
  // Shared with every run's actor: an error below must not leave them a dangling load.
  auto l = std::make_shared<load>();
  l->client = std::make_shared<bench::answering_client>(latency);
  l->total = (rounds + 3) * k;
  auto all_done = l->all_done.get_future();
  auto take = [l] {
    return sample{std::chrono::steady_clock::now(), l->done.load(),
                  bench::thread_cpu_by_group()};
  };
  for (size_t i = 0; i < k; ++i)
    launch(sys, l);
  std::optional<sample> from, to;
  auto deadline = std::chrono::steady_clock::now() + 60s + latency * 4 * (rounds + 3);
  while (all_done.wait_for(2ms) != std::future_status::ready) {
    auto done = l->done.load();
    if (!from && done >= 2 * k) from = take();
    if (from && !to && done >= (2 + rounds) * k) to = take();
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(std::to_string(l->done.load()) + " of " +
                               std::to_string(l->total) + " runs finished before the deadline");
  }
  if (l->failed) throw std::runtime_error(std::to_string(l->failed.load()) + " runs failed");
  if (!from || !to) throw std::runtime_error("the window's edges were not sampled");
  auto runs = static_cast<double>(to->done - from->done);
  if (runs == 0 || to->at == from->at)
    throw std::runtime_error("no run finished inside the window (try more --rounds)");
  auto us = [&](const char* group) {
    return static_cast<double>(to->threads[group].ns - from->threads[group].ns) / 1e3 / runs;
  };
  figures f;
  f.k = k;
  f.runs_per_s = runs / std::chrono::duration<double>(to->at - from->at).count();
  f.clock_us = us("clock");
  f.caf_us = us("caf-workers") + f.clock_us;
  f.client_us = us("client-io");
  return f;
}

} // namespace

int main(int argc, char** argv) {
  bench::load_flags flags{4};
  for (int i = 1; i < argc; ++i) {
    if (!flags.take(i, argc, argv)) {
      std::cerr << "usage: bench_actor_floor [--inflight K]... [--latency-ms N] [--rounds R] "
                   "[--smoke]\n";
      return 2;
    }
  }
  auto inflight = flags.inflight;
  if (inflight.empty())
    inflight = flags.smoke ? std::vector<size_t>{50} : std::vector<size_t>{1000, 10'000};
  auto rounds = flags.smoke ? 1 : flags.rounds;
  auto latency_ms = flags.latency_ms;
  try {
    caf::actor_system_config cfg;
    apply_runtime_settings(cfg);
    caf::actor_system sys{cfg};
    std::printf("one CAF actor per run, 4 calls on an in-memory client answering after %u ms,\n"
                "the runtime's CAF settings; sustained, over %zu·K runs after the first 2K\n\n"
                "%8s %9s %16s %13s %18s\n",
                latency_ms, rounds, "inflight", "runs/s", "CAF us/run", "of it clock",
                "client thread us");
    for (auto k : inflight) {
      auto f = measure(sys, k, rounds, std::chrono::milliseconds{latency_ms});
      std::printf("%8zu %9.0f %16.1f %13.1f %18.1f\n", f.k, f.runs_per_s, f.caf_us, f.clock_us,
                  f.client_us);
    }
    std::printf(
        "\n(CAF: its scheduler workers and clock, schedstat; the client thread stands in\n"
        " for the client's I/O thread, whose work bench_round_trip_floor and\n"
        " bench_call_work price. floor of an actor per execution = CAF + those two.)\n");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_actor_floor: " << e.what() << '\n';
    return 1;
  }
}
