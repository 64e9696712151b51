// The runtime over a fleet of three real control planes (static list:
// GUESTFLOW_CONTROL_PLANE_URL=A,B,C), as a user runs `guestflow code` and `guestflow
// component`: placement spreads guests, skips a full or draining node, refuses at once when
// none has room; a node SIGKILLed under load fails only its own runs, and nothing is leaked
// once it is back; two runtimes racing for one reusable name get one guest.

#include "controlplane/client/client.hpp"
#include "controlplane/client/fleet_client.hpp"
#include "fleet/etcd_client.hpp"
#include "messages/fleet.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/fleet/fleet_fixture.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/guest_programs.hpp"

#include <algorithm>
#include <csignal>
#include <future>
#include <gtest/gtest.h>
#include <optional>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

/// Waits in the guest until the test puts /workspace/go: a run that is in flight for as
/// long as the test needs, and then completes.
constexpr const char* waits_for_go = "import os, time\n"
                                     "print('started', flush=True)\n"
                                     "while not os.path.exists('/workspace/go'):\n"
                                     "    time.sleep(0.05)\n"
                                     "print('done', flush=True)\n";

using test_support::counter_program;

class fleet_test : public fleet_fixture {
protected:
  void three(const std::vector<std::string>& args = {}) {
    for (auto name : {"n1", "n2", "n3"})
      start_node(name, args);
  }

  std::unique_ptr<cli_run> start_code(const std::string& program,
                                      const std::string& runtime = "runtime") {
    return std::make_unique<cli_run>(
        std::vector<std::string>{"code", "--timeout", "600", program}, env(runtime),
        dir.path());
  }

  cli_run::outcome code(const std::string& source) {
    auto run = start_code(file("p.py", source));
    return run->wait();
  }

  /// Starts `n` waiting runs one after another, each once the previous one's program has
  /// started (so every run's placement sees the guests before it, and every guest is
  /// running — a guest still `creating` refuses the file that releases it).
  std::vector<std::unique_ptr<cli_run>> start_waiting_runs(size_t n) {
    std::vector<std::unique_ptr<cli_run>> runs;
    auto program = file("waits.py", waits_for_go);
    for (size_t i = 0; i < n; ++i) {
      auto before = live_total();
      runs.push_back(start_code(program));
      auto& run = *runs.back();
      EXPECT_TRUE(test_support::eventually(
          [&] { return run.out_so_far() == "started\n" || run.try_wait().has_value(); }, 60s))
          << "run " << i << " never started";
      EXPECT_EQ(live_total(), before + 1) << "run " << i;
    }
    return runs;
  }

  /// Lets every waiting guest on node `i` finish.
  void release(size_t i) {
    http_client http{nodes[i]->port()};
    for (auto& g : live(i)) {
      auto r = http.call("PUT", "/v1/sandboxes/" + g.id + "/files?path=/workspace/go", "go");
      EXPECT_EQ(r.status, 200u) << names[i] << " " << g.id << " " << g.name << ": " << r.body;
    }
  }
};

TEST_F(fleet_test, placement_spreads_guests_over_the_nodes_least_committed_first) {
  three();
  auto runs = start_waiting_runs(6);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(live(i).size(), 2u) << names[i];
  for (size_t i = 0; i < 3; ++i)
    release(i);
  for (auto& r : runs) {
    auto o = r->wait();
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "started\ndone\n");
  }
  EXPECT_TRUE(test_support::eventually([&] { return live_total() == 0; }, 30s));
}

TEST_F(fleet_test, a_full_node_is_skipped) {
  start_node("n1", {"--memory-budget-mb", "128"}); // no shape fits
  start_node("n2");
  start_node("n3");
  for (int i = 0; i < 4; ++i) {
    auto o = code("print('hi')\n");
    EXPECT_EQ(o.status, 0) << o.err;
    EXPECT_EQ(o.out, "hi\n");
  }
  EXPECT_TRUE(records(0).empty());
  EXPECT_EQ(records(1).size() + records(2).size(), 4u);
}

TEST_F(fleet_test, with_every_node_full_a_run_fails_at_once_with_capacity) {
  three({"--memory-budget-mb", "128"});
  auto o = code("print('never')\n");
  EXPECT_EQ(o.status, 125) << o.err;
  EXPECT_NE(o.err.find("capacity"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("no control plane has room for s-1vcpu-256mb: 3 nodes, 3 full"),
            std::string::npos)
      << o.err;
  EXPECT_EQ(o.out, "");
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(records(i).empty());
}

TEST_F(fleet_test, no_room_anywhere_is_capacity_at_once_naming_full_and_draining_nodes) {
  start_node("n1");
  start_node("n2", {"--memory-budget-mb", "128"});
  start_node("n3", {"--memory-budget-mb", "128"});
  ASSERT_EQ(drain(0, true), 200u);
  cp::endpoint ep;
  ep.base_url = urls();
  auto made = cp::client::make(ep);
  ASSERT_TRUE(made) << made.error().message;
  auto c = *made;
  sandbox_create_request req;
  req.shape = "s-1vcpu-256mb";
  std::promise<result<sandbox_created>> p;
  auto t0 = std::chrono::steady_clock::now();
  c->create(req, 30s, [&](result<sandbox_created> r) { p.set_value(std::move(r)); });
  auto fut = p.get_future();
  ASSERT_EQ(fut.wait_for(30s), std::future_status::ready);
  auto r = fut.get();
  auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::capacity);
  EXPECT_EQ(r.error().message,
            "no control plane has room for s-1vcpu-256mb: 3 nodes, 2 full, 1 draining");
  // The bound: refused in under a second, never queued (here no node is asked).
  EXPECT_LT(took, 1s);
  // What serve's /metrics shows for this client: per-node gauges, the failure by reason.
  auto snap = cp::fleet_snapshot_of(*c);
  ASSERT_TRUE(snap);
  EXPECT_EQ(snap->failures.no_room, 1u);
  EXPECT_EQ(snap->nodes.size(), 3u);
  auto text = cp::prometheus_text(*snap);
  for (auto want :
       {"guestflow_fleet_node_draining{node=\"" + url(0) + "\"} 1\n",
        "guestflow_fleet_node_ready{node=\"" + url(1) + "\"} 1\n",
        "guestflow_fleet_node_memory_budget_mib{node=\"" + url(2) + "\"} 128\n",
        "guestflow_fleet_node_guests{node=\"" + url(2) + "\"} 0\n",
        std::string{"guestflow_fleet_placement_failures_total{reason=\"no_room\"} 1\n"}})
    EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
  c->shutdown();
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(records(i).empty());
}

TEST_F(fleet_test, serve_over_the_fleet_fails_a_run_with_capacity_and_shows_it_in_metrics) {
  start_node("n1");
  start_node("n2", {"--memory-budget-mb", "128"});
  start_node("n3", {"--memory-budget-mb", "128"});
  ASSERT_EQ(drain(0, true), 200u);
  std::string token = "fleet-test-token";
  control_plane_process serve{{"serve", "--listen", "127.0.0.1:0", "--token", token},
                              env("serve"),
                              dir.path() / "serve.stderr"};
  http_client http{serve.port()};
  header_map bearer{{"authorization", "Bearer " + token}};
  auto run = http.call("POST", "/v1/sandbox/run", "{\"code\":\"print(1)\"}", bearer, 60s);
  EXPECT_NE(run.body.find("capacity"), std::string::npos) << run.status << " " << run.body;
  EXPECT_NE(run.body.find("3 nodes, 2 full, 1 draining"), std::string::npos) << run.body;
  auto metrics = http.call("GET", "/metrics", {}, bearer, 10s);
  ASSERT_EQ(metrics.status, 200u) << metrics.body;
  for (auto want :
       {"guestflow_fleet_node_draining{node=\"" + url(0) + "\"} 1\n",
        "guestflow_fleet_node_ready{node=\"" + url(1) + "\"} 1\n",
        "guestflow_fleet_node_memory_budget_mib{node=\"" + url(2) + "\"} 128\n",
        std::string{"guestflow_fleet_placement_failures_total{reason=\"no_room\"} 1\n"}})
    EXPECT_NE(metrics.body.find(want), std::string::npos) << want << " in\n" << metrics.body;
  for (size_t i = 0; i < 3; ++i)
    EXPECT_TRUE(records(i).empty());
}

TEST_F(fleet_test, a_draining_node_takes_no_new_guests_until_the_drain_ends) {
  three();
  ASSERT_EQ(drain(0, true), 200u);
  auto runs = start_waiting_runs(2);
  EXPECT_TRUE(live(0).empty());
  EXPECT_EQ(live(1).size(), 1u);
  EXPECT_EQ(live(2).size(), 1u);
  ASSERT_EQ(drain(0, false), 200u);
  auto more = start_waiting_runs(1); // the least committed node is n1 again
  EXPECT_EQ(live(0).size(), 1u);
  for (size_t i = 0; i < 3; ++i)
    release(i);
  for (auto* set : {&runs, &more})
    for (auto& r : *set)
      EXPECT_EQ(r->wait().status, 0);
}

TEST_F(fleet_test, a_node_killed_under_load_fails_only_its_runs_and_leaks_nothing) {
  three();
  auto runs = start_waiting_runs(6);
  std::vector<std::string> on_n2;
  for (auto& g : live(1))
    on_n2.push_back(g.id);
  ASSERT_EQ(on_n2.size(), 2u);
  kill_node(1);
  release(0);
  release(2);
  // The four runs on n1 and n3 complete while n2 is down.
  std::vector<std::optional<cli_run::outcome>> ended(runs.size());
  auto ended_with = [&](int status) {
    size_t n = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (!ended[i]) ended[i] = runs[i]->try_wait();
      if (ended[i] && ended[i]->status == status) ++n;
    }
    return n;
  };
  ASSERT_TRUE(test_support::eventually([&] { return ended_with(0) == 4; }, 60s));
  // The two on n2 fail with `unavailable`; their deletes stay owed until n2 is back.
  restart_node(1);
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!ended[i]) ended[i] = runs[i]->wait(120s);
    if (ended[i]->status == 0) {
      EXPECT_EQ(ended[i]->out, "started\ndone\n");
      continue;
    }
    EXPECT_EQ(ended[i]->status, 125) << ended[i]->err;
    EXPECT_NE(ended[i]->err.find("unavailable"), std::string::npos) << ended[i]->err;
  }
  EXPECT_EQ(ended_with(0), 4u);
  EXPECT_TRUE(test_support::eventually([&] { return live_total() == 0; }, 90s))
      << "left: n1 " << live(0).size() << ", n2 " << live(1).size() << ", n3 "
      << live(2).size();
  // n2's two guests were deleted (the owed deletes went through once it was back), not
  // merely left failed by its restart.
  auto status_on_n2 = [&] {
    std::string out;
    for (auto& id : on_n2)
      for (auto& v : records(1))
        if (v.id == id) out += std::string{to_string(v.status)} + " ";
    return out;
  };
  EXPECT_TRUE(
      test_support::eventually([&] { return status_on_n2() == "destroyed destroyed "; }, 30s))
      << status_on_n2();
}

TEST_F(fleet_test, two_runtimes_racing_for_one_reusable_name_get_one_guest) {
  three();
  auto p = file("count.py", counter_program);
  std::vector<std::string> args{"component",      "--flow-id", "flow-1",
                                "--component-id", "race",      "--reuse",
                                "flow",           "--python",  p};
  cli_run a{args, env("runtime-a"), dir.path()};
  cli_run b{args, env("runtime-b"), dir.path()};
  auto ra = a.wait();
  auto rb = b.wait();
  ASSERT_EQ(ra.status, 0) << ra.err;
  ASSERT_EQ(rb.status, 0) << rb.err;
  std::vector<std::string> outs{ra.out, rb.out};
  std::sort(outs.begin(), outs.end());
  EXPECT_EQ(outs, (std::vector<std::string>{"1\n", "2\n"}));
  EXPECT_EQ(live_total(), 1u);
}

} // namespace

namespace {

/// The same fleet coordinated through a real etcd: nodes register under a lease
/// (`--fleet`), runtimes read them with GUESTFLOW_FLEET.
class fleet_etcd_test : public fleet_test {
protected:
  std::unique_ptr<test_support::etcd_process> etcd =
      std::make_unique<test_support::etcd_process>();

  void three_registered(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"--fleet", etcd->url(), "--fleet-ttl-seconds", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    for (auto name : {"n1", "n2", "n3"})
      start_node(name, args);
    auto c = fleet::etcd_client::make(etcd->url());
    ASSERT_TRUE(c);
    etcd_client = *c;
    ASSERT_TRUE(test_support::eventually([&] { return registered() == 3; }, 30s));
  }

  size_t registered() const {
    auto r = etcd_client->range(std::string{fleet_nodes_prefix});
    return r ? r->size() : 0;
  }

  std::map<std::string, std::string> fleet_env(const std::string& runtime = "runtime") const {
    return env(runtime, {{"GUESTFLOW_FLEET", etcd->url()}});
  }

  std::unique_ptr<cli_run> start_fleet_code(const std::string& program) {
    return std::make_unique<cli_run>(
        std::vector<std::string>{"code", "--timeout", "600", program}, fleet_env(), dir.path());
  }

  /// Guests the nodes' etcd records count (what a new runtime places by).
  uint64_t recorded_guests() const {
    auto r = etcd_client->range(std::string{fleet_nodes_prefix});
    uint64_t n = 0;
    if (r)
      for (auto& kv : *r)
        if (auto rec = decode<node_capacity>(kv.value)) n += rec->guests;
    return n;
  }

  std::shared_ptr<fleet::etcd_client> etcd_client;
};

TEST_F(fleet_etcd_test, places_over_registered_nodes_and_forgets_one_whose_lease_expired) {
  three_registered();
  auto program = file("waits.py", waits_for_go);
  std::vector<std::unique_ptr<cli_run>> runs;
  for (size_t i = 0; i < 3; ++i) {
    runs.push_back(start_fleet_code(program));
    ASSERT_TRUE(test_support::eventually([&] { return live_total() == i + 1; }, 60s));
    // Each run is a new runtime, placing by the records: the next one starts once they
    // count this guest (a node puts its record on change, a moment after the create).
    ASSERT_TRUE(test_support::eventually([&] { return recorded_guests() == i + 1; }, 30s));
  }
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(live(i).size(), 1u) << names[i];
  // Killed once every program runs: a node killed between two calls of a run can be back
  // (restarted below) before that run's retries give up, and then the run goes on.
  for (auto& r : runs)
    ASSERT_TRUE(test_support::eventually([&] { return r->out_so_far() == "started\n"; }, 60s))
        << r->err_so_far();
  kill_node(2);
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  // New runs go to the nodes that are left.
  auto o = std::make_unique<cli_run>(
               std::vector<std::string>{"code", file("hi.py", "print('hi')\n")}, fleet_env(),
               dir.path())
               ->wait();
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_EQ(o.out, "hi\n");
  EXPECT_EQ(records(0).size() + records(1).size(), 3u);
  release(0);
  release(1);
  restart_node(2);
  // The runs on the nodes left complete; the one on the killed node failed `unavailable`.
  size_t completed = 0, lost = 0;
  for (auto& r : runs) {
    auto o = r->wait(120s);
    if (o.status == 0 && o.out == "started\ndone\n") ++completed;
    if (o.status == 125 && o.err.find("unavailable") != std::string::npos) ++lost;
    EXPECT_TRUE(o.status == 0 || o.status == 125) << o.status << " " << o.err;
  }
  EXPECT_EQ(completed, 2u);
  EXPECT_EQ(lost, 1u);
  EXPECT_TRUE(test_support::eventually([&] { return live_total() == 0; }, 90s));
}

TEST_F(fleet_etcd_test, a_killed_nodes_run_fails_unavailable_long_before_its_lease_ends) {
  // A lease (8 s) longer than the cut call's probe (2 s): the run must not wait for it.
  for (auto name : {"n1", "n2"})
    start_node(name, {"--fleet", etcd->url(), "--fleet-ttl-seconds", "8"});
  auto c = fleet::etcd_client::make(etcd->url());
  ASSERT_TRUE(c);
  etcd_client = *c;
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_EQ(drain(0, true), 200u); // the run goes to n2
  auto run = start_fleet_code(file("waits.py", waits_for_go));
  ASSERT_TRUE(test_support::eventually([&] { return run->out_so_far() == "started\n"; }, 60s))
      << run->err_so_far();
  ASSERT_EQ(live(1).size(), 1u);
  kill_node(1);
  // The failure is told while n2's record is still in etcd; the CLI then waits (at most the
  // reaper's drain deadline, 60 s) at exit for the delete it owes n2. Its stdout stays the
  // program's: the fleet's warnings go to stderr.
  ASSERT_TRUE(test_support::eventually(
      [&] { return run->err_so_far().find("unavailable") != std::string::npos; }, 15s))
      << run->err_so_far();
  EXPECT_EQ(registered(), 2u) << "the lease ended first: the failure came from its expiry";
  restart_node(1); // registers once its old lease is out; the owed delete then goes through
  auto o = run->wait(120s);
  EXPECT_EQ(o.status, 125) << o.err;
  EXPECT_EQ(o.out, "started\n");
  EXPECT_TRUE(test_support::eventually([&] { return live_total() == 0; }, 30s));
}

TEST_F(fleet_etcd_test, with_every_node_full_a_run_fails_at_once_with_capacity) {
  three_registered({"--memory-budget-mb", "128"});
  auto o =
      std::make_unique<cli_run>(std::vector<std::string>{"code", file("p.py", "print(1)\n")},
                                fleet_env(), dir.path())
          ->wait();
  EXPECT_EQ(o.status, 125) << o.err;
  EXPECT_NE(o.err.find("no control plane has room for s-1vcpu-256mb: 3 nodes, 3 full"),
            std::string::npos)
      << o.err;
}

TEST_F(fleet_etcd_test, two_runtimes_racing_for_one_reusable_name_get_one_guest_and_one_claim) {
  three_registered();
  auto p = file("count.py", counter_program);
  std::vector<std::string> args{"component",      "--flow-id", "flow-1",
                                "--component-id", "race",      "--reuse",
                                "flow",           "--python",  p};
  cli_run a{args, fleet_env("runtime-a"), dir.path()};
  cli_run b{args, fleet_env("runtime-b"), dir.path()};
  auto ra = a.wait();
  auto rb = b.wait();
  ASSERT_EQ(ra.status, 0) << ra.err;
  ASSERT_EQ(rb.status, 0) << rb.err;
  std::vector<std::string> outs{ra.out, rb.out};
  std::sort(outs.begin(), outs.end());
  EXPECT_EQ(outs, (std::vector<std::string>{"1\n", "2\n"}));
  ASSERT_EQ(live_total(), 1u);
  auto claims = etcd_client->range(std::string{fleet_names_prefix});
  ASSERT_TRUE(claims);
  ASSERT_EQ(claims->size(), 1u);
  auto claim = decode<name_claim>((*claims)[0].value);
  ASSERT_TRUE(claim);
  for (size_t i = 0; i < 3; ++i)
    if (!live(i).empty()) {
      EXPECT_EQ(claim->node, names[i]);
    }
}

} // namespace
