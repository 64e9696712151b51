// bench_fleet [--guests N] [--nodes K] [--inflight C] [--latency-ms L] [--out FILE]
//
// Placement over a fleet, as the runtime does it: K real `guestflow control-plane`
// processes in their simulated domain (--simulate-latency-ms L: every call answered after L
// ms, no guest started; each its own state dir and --node name) and a real etcd holding
// their node records (written here, as a node's --fleet registrar would, with a budget that
// holds every guest: the simulated domain keeps no capacity of its own), behind one fleet
// client (cp::client::make with GUESTFLOW_FLEET's etcd://…). N creates of s-1vcpu-256mb are
// sent, C in flight at once; each create's latency is request → answer through the fleet
// client (placement choice + the chosen node's create). Then each node's own list counts
// the guests it got: balance = max/min committed (guests × 256 MiB) over the nodes.
//
// Printed: placement latency p50/p90/p99/max, creates/s, per-node guests and committed MiB,
// the balance, the fleet client's placement counters; then the floors, each met/MISSED:
// (1) p99 placement latency <= L + 25 ms (the fleet client adds a choice and a hop, not a
// round trip of its own); (2) balance max/min committed <= 1.10 (least committed first);
// (3) the peer in the same run: the same N creates, C in flight, sent straight to one more
// simulated control plane (not in the fleet) through the plain single-node client — fleet
// p50 / direct p50 <= 1.50 (placement costs a choice, not a second round trip). The load
// (/proc/loadavg) is printed beside the figures: on a shared machine they are noisy.
//
// Reproduce (no root needed: no guest is started; needs /usr/bin/etcd):
//   cmake --build BUILD --target bench_fleet guestflow
//   BUILD/bench/fleet/bench_fleet --out bench/results/fleet.txt
#include "bench/load_flags.hpp"
#include "bench/summary.hpp"
#include "controlplane/client/client.hpp"
#include "controlplane/client/fleet_client.hpp"
#include "fleet/etcd_client.hpp"
#include "messages/fleet.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

using namespace guestflow;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct flags {
  size_t guests = 1000;
  size_t nodes = 3;
  size_t inflight = 32;
  uint64_t latency_ms = 1;
  std::string out;
};

flags parse(int argc, char** argv) {
  flags f;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--guests")
      f.guests = bench::uint_flag<size_t>("--guests", next(), 1, 100000);
    else if (a == "--nodes")
      f.nodes = bench::uint_flag<size_t>("--nodes", next(), 1, 16);
    else if (a == "--inflight")
      f.inflight = bench::uint_flag<size_t>("--inflight", next(), 1, 4096);
    else if (a == "--latency-ms")
      f.latency_ms = bench::uint_flag<uint64_t>("--latency-ms", next(), 0, 10000);
    else if (a == "--out")
      f.out = std::string{next()};
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  return f;
}

struct create_run {
  std::vector<double> latency_ms;
  std::vector<std::string> ids;
  size_t failed = 0;
  std::string first_error;
  double wall_s = 0;
};

/// N creates of s-1vcpu-256mb through `client`, `inflight` at once.
create_run run_creates(const std::shared_ptr<cp::client>& client, size_t n, size_t inflight) {
  create_run out;
  out.latency_ms.assign(n, 0);
  out.ids.assign(n, {});
  std::atomic<size_t> next{0}, failed{0};
  std::mutex mu;
  std::condition_variable cv;
  size_t done = 0;
  std::function<void()> launch = [&] {
    auto i = next.fetch_add(1);
    if (i >= n) return;
    sandbox_create_request req;
    req.shape = "s-1vcpu-256mb";
    auto t0 = clock_type::now();
    client->create(req, 30s, [&, i, t0](result<sandbox_created> r) {
      out.latency_ms[i] =
          std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
      if (r)
        out.ids[i] = r->id;
      else {
        ++failed;
        std::lock_guard lk{mu};
        if (out.first_error.empty()) out.first_error = r.error().message;
      }
      launch();
      std::lock_guard lk{mu};
      ++done;
      cv.notify_all();
    });
  };
  auto t0 = clock_type::now();
  for (size_t k = 0; k < inflight; ++k)
    launch();
  {
    std::unique_lock lk{mu};
    cv.wait_for(lk, 600s, [&] { return done == n; });
  }
  out.wall_s = std::chrono::duration<double>(clock_type::now() - t0).count();
  out.failed = failed.load();
  return out;
}

std::string loadavg() {
  std::ifstream in{"/proc/loadavg"};
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string floor_line(const char* what, double measured, double limit) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s: %.2f (<= %.2f): %s", what, measured, limit,
                measured <= limit ? "met" : "MISSED");
  return buf;
}

} // namespace

int main(int argc, char** argv) {
  auto f = parse(argc, argv);
  test_support::temp_dir dir{"guestflow-bench-fleet"};
  test_support::etcd_process etcd;
  auto records = fleet::etcd_client::make(etcd.url());
  if (!records) {
    std::cerr << records.error().message << "\n";
    return 1;
  }
  // Every guest fits on one node: the balance is placement's doing, not the budgets'.
  uint64_t budget = f.guests * 256 + 1024;
  std::vector<std::unique_ptr<testing::control_plane_process>> nodes;
  for (size_t i = 0; i < f.nodes; ++i) {
    auto name = "n" + std::to_string(i + 1);
    nodes.push_back(std::make_unique<testing::control_plane_process>(
        dir.path() / name, std::vector<std::string>{"--node", name, "--simulate-latency-ms",
                                                    std::to_string(f.latency_ms)}));
    node_capacity rec{
        name, budget, 0,    0,
        0,    false,  true, "http://127.0.0.1:" + std::to_string(nodes.back()->port())};
    if (auto put = (*records)->put(std::string{fleet_nodes_prefix} + name, encode(rec)); !put) {
      std::cerr << put.error().message << "\n";
      return 1;
    }
  }
  cp::endpoint ep;
  ep.base_url = etcd.url();
  auto made = cp::client::make(ep);
  if (!made) {
    std::cerr << "fleet client: " << made.error().message << "\n";
    return 1;
  }
  auto client = *made;

  // The peer: one more simulated control plane, not in the fleet, behind the plain client.
  testing::control_plane_process peer{
      dir.path() / "peer", std::vector<std::string>{"--node", "peer", "--simulate-latency-ms",
                                                    std::to_string(f.latency_ms)}};
  cp::endpoint one;
  one.base_url = "http://127.0.0.1:" + std::to_string(peer.port());
  auto direct_client = cp::client::make(one);
  if (!direct_client) {
    std::cerr << "direct client: " << direct_client.error().message << "\n";
    return 1;
  }
  auto load_before = loadavg();
  auto direct = run_creates(*direct_client, f.guests, f.inflight);
  auto fleet_run = run_creates(client, f.guests, f.inflight);
  auto& latency_ms = fleet_run.latency_ms;
  auto& ids = fleet_run.ids;
  auto failed = fleet_run.failed + direct.failed;
  auto first_error = fleet_run.first_error.empty() ? direct.first_error : fleet_run.first_error;
  auto wall = fleet_run.wall_s;

  std::ostringstream out;
  out << "bench_fleet: " << f.guests << " creates of s-1vcpu-256mb over " << f.nodes
      << " simulated control planes (--simulate-latency-ms " << f.latency_ms << "), "
      << f.inflight << " in flight, node records in etcd\n";
  out << "load (1/5/15 min) before: " << load_before << ", after: " << loadavg() << "\n";
  out << "failed creates: " << failed
      << (first_error.empty() ? "" : " (first: " + first_error + ")") << "\n";
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "placement latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f; %.0f creates/s\n",
      bench::percentile(latency_ms, 0.5), bench::percentile(latency_ms, 0.9),
      bench::percentile(latency_ms, 0.99), bench::percentile(latency_ms, 1.0),
      static_cast<double>(f.guests) / wall);
  out << buf;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (size_t i = 0; i < f.nodes; ++i) {
    auto listed = bench::await<sandbox_list>([&](auto cb) {
      cp::endpoint one;
      one.base_url = "http://127.0.0.1:" + std::to_string(nodes[i]->port());
      auto c = cp::client::make(one);
      if (!c) return cb(c.error());
      (*c)->list("", 1, 0, 10s, [c = *c, cb](result<sandbox_list> r) { cb(std::move(r)); });
    });
    if (!listed) {
      out << "node n" << i + 1 << ": list failed: " << listed.error().message << "\n";
      continue;
    }
    auto committed = listed->total * 256;
    out << "node n" << i + 1 << ": " << listed->total << " guests, committed " << committed
        << " MiB\n";
    lo = std::min(lo, committed);
    hi = std::max(hi, committed);
  }
  double balance = lo == 0 ? 1e9 : static_cast<double>(hi) / static_cast<double>(lo);
  if (auto s = cp::fleet_snapshot_of(*client))
    out << "placement failures: no_room " << s->failures.no_room << ", refused "
        << s->failures.refused << ", unreachable " << s->failures.unreachable << "\n";
  out << floor_line("p99 placement latency ms", bench::percentile(latency_ms, 0.99),
                    static_cast<double>(f.latency_ms) + 25.0)
      << "\n";
  out << floor_line("balance max/min committed", balance, 1.10) << "\n";
  {
    char peer_buf[200];
    std::snprintf(peer_buf, sizeof peer_buf,
                  "direct (one node, plain client) latency ms: p50 %.2f  p99 %.2f; %.0f "
                  "creates/s\n",
                  bench::percentile(direct.latency_ms, 0.5),
                  bench::percentile(direct.latency_ms, 0.99),
                  static_cast<double>(f.guests) / direct.wall_s);
    out << peer_buf;
    auto d50 = std::max(bench::percentile(direct.latency_ms, 0.5), 0.001);
    out << floor_line("fleet p50 / direct p50", bench::percentile(latency_ms, 0.5) / d50, 1.50)
        << "\n";
  }
  std::cout << out.str();
  if (!f.out.empty()) std::ofstream{f.out} << out.str();
  for (auto& id : ids)
    if (!id.empty())
      bench::await<sandbox_deleted>([&](auto cb) { client->remove(id, 10s, std::move(cb)); });
  for (auto& id : direct.ids)
    if (!id.empty())
      bench::await<sandbox_deleted>(
          [&](auto cb) { (*direct_client)->remove(id, 10s, std::move(cb)); });
  client->shutdown();
  (*direct_client)->shutdown();
  return failed == 0 ? 0 : 1;
}
