// Capacity on one node: the memory budget and the guest cap refuse a create with 429
// `capacity` before anything is built, creates in flight hold their reservation, drain, and
// the start-up refusals of the capacity flags.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/integration/control_plane/out_of_descriptors.hpp"

#include <atomic>
#include <fstream>
#include <optional>
#include <sstream>
#include <sys/resource.h>
#include <thread>

namespace guestflow::testing {
namespace {

using control_plane_capacity = control_plane_test;
const std::string small = R"({"shape":"s-1vcpu-256mb"})";

/// A number or boolean field of `GET /v1/capacity`'s data, as its JSON text.
std::string field(const http_reply& r, const std::string& name) {
  auto key = "\"" + name + "\":";
  auto at = r.body.find(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no " << name << " in " << r.body;
    return {};
  }
  at += key.size();
  return r.body.substr(at, r.body.find_first_of(",}", at) - at);
}

/// The refusal every full, draining or fenced node answers a create with.
void expect_capacity_refusal(const http_reply& r, const std::string& needle) {
  EXPECT_EQ(r.status, 429u) << r.body;
  EXPECT_NE(r.body.find(R"({"status":"fail","data":{"code":"capacity","message":")"),
            std::string::npos)
      << r.body;
  EXPECT_NE(r.body.find(needle), std::string::npos)
      << "expected '" << needle << "' in " << r.body;
}

TEST_F(control_plane_capacity, the_budget_counts_live_and_paused_guests_and_refuses_past_it) {
  stop();
  start({"--memory-budget-mb", "600", "--max-guests", "10", "--node", "node-a"});
  auto c = call("GET", "/v1/capacity");
  ASSERT_EQ(c.status, 200u) << c.body;
  EXPECT_EQ(field(c, "node"), "\"node-a\"");
  EXPECT_EQ(field(c, "memory_budget_mib"), "600");
  EXPECT_EQ(field(c, "memory_committed_mib"), "0");
  EXPECT_EQ(field(c, "guests"), "0");
  EXPECT_EQ(field(c, "max_guests"), "10");
  EXPECT_EQ(field(c, "draining"), "false");
  EXPECT_EQ(field(c, "ready"), "true");

  auto first = create(small);
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + first.id + "/pause").status, 200u);
  auto second = create(small);
  c = call("GET", "/v1/capacity");
  EXPECT_EQ(field(c, "memory_committed_mib"), "512") << "a paused guest still holds memory";
  EXPECT_EQ(field(c, "guests"), "2");

  auto workspaces = workspace_count();
  auto refused = call("POST", "/v1/sandboxes", small);
  expect_capacity_refusal(refused, "s-1vcpu-256mb needs 256 MiB and 512 of 600 MiB");
  EXPECT_NE(refused.body.find("--memory-budget-mb"), std::string::npos) << refused.body;
  EXPECT_EQ(sandbox_total(), 2u) << "a refused create leaves no record";
  EXPECT_EQ(workspace_count(), workspaces) << "a refused create builds nothing";
  // A smaller shape still fits.
  create(R"({"shape":"s-1vcpu-64mb"})");
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "memory_committed_mib"), "576");

  // A destroyed guest commits nothing: its memory is free for the next create.
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + second.id).status, 200u);
  c = call("GET", "/v1/capacity");
  EXPECT_EQ(field(c, "memory_committed_mib"), "320");
  EXPECT_EQ(field(c, "guests"), "2");
  create(small);
}

TEST_F(control_plane_capacity, max_guests_refuses_the_guest_past_it) {
  stop();
  start({"--max-guests", "1"});
  create(R"({"shape":"s-1vcpu-64mb"})");
  expect_capacity_refusal(call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-64mb"})"),
                          "1 of 1 sandboxes (--max-guests)");
  EXPECT_EQ(sandbox_total(), 1u);
}

TEST_F(control_plane_capacity, a_burst_of_creates_cannot_overshoot_the_budget) {
  stop();
  start({"--memory-budget-mb", "512", "--workers", "8"});
  // Eight creates at once for room for two: each is admitted against the others'
  // reservations (creates in flight), never against a count that lags behind them.
  std::atomic<int> made{0}, full{0}, other{0};
  std::vector<std::string> ids(8);
  std::vector<std::thread> burst;
  for (int i = 0; i < 8; ++i)
    burst.emplace_back([&, i] {
      auto r = call("POST", "/v1/sandboxes", small);
      if (r.status == 200) {
        ++made;
        auto c = decode<jsend>(r.body);
        if (c)
          if (auto created = decode<sandbox_created>(c->data.text)) ids[i] = created->id;
      } else if (r.status == 429) {
        ++full;
      } else {
        ++other;
      }
    });
  for (auto& t : burst)
    t.join();
  for (const auto& id : ids)
    if (!id.empty()) created_.push_back(id);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(full, 6);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "memory_committed_mib"), "512");
  EXPECT_EQ(sandbox_total(), 2u) << "refused creates leave no record";
}

TEST_F(control_plane_capacity, defaults_are_most_of_the_host_and_1024_guests) {
  uint64_t total_kib = 0;
  std::ifstream in{"/proc/meminfo"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("MemTotal:", 0) == 0) total_kib = std::stoull(line.substr(9));
  ASSERT_GT(total_kib, 0u);
  auto c = call("GET", "/v1/capacity");
  EXPECT_EQ(field(c, "memory_budget_mib"), std::to_string(total_kib / 1024 * 8 / 10));
  EXPECT_EQ(field(c, "max_guests"), "1024");
  EXPECT_EQ(field(c, "ready"), "true");
}

// Warm-pool guests are capacity on loan: committed while the pool holds them, lent to a
// create that needs their room, refilled only into room nobody holds.
TEST_F(control_plane_capacity, warm_pool_guests_count_as_committed_and_are_lent) {
  stop();
  start({"--memory-budget-mb", "256", "--warm-pool", "s-1vcpu-64mb=2"});
  const std::string big = R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})";
  const std::string pooled = R"({"shape":"s-1vcpu-64mb","egress":["240.0.0.0/4"]})";
  auto committed = [&] { return field(call("GET", "/v1/capacity"), "memory_committed_mib"); };
  ASSERT_TRUE(eventually([&] { return committed() == "128"; }, std::chrono::seconds{60}))
      << "the pool's 2 guests, once built";
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "guests"), "2");
  // 128 + 256 > 256: admitted all the same, the pool's guests deleted for it.
  auto g = create(big);
  EXPECT_EQ(committed(), "256");
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "guests"), "1") << "the pool holds none";
  // Full of real guests, nothing to lend: refused, and the pool builds nothing.
  expect_capacity_refusal(call("POST", "/v1/sandboxes", pooled), "256 of 256 MiB");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + g.id).status, 200u);
  ASSERT_TRUE(eventually([&] { return committed() == "128"; }, std::chrono::seconds{60}))
      << "refilled into the room the deleted guest gave back";
  // A take moves a guest from the pool to its caller; the refill is one guest more.
  create(pooled);
  ASSERT_TRUE(eventually([&] { return committed() == "192"; }, std::chrono::seconds{60}));
}

TEST_F(control_plane_capacity, drain_refuses_creates_and_leaves_guests_running) {
  auto g = create(small);
  auto d = call("POST", "/v1/drain");
  ASSERT_EQ(d.status, 200u) << d.body;
  EXPECT_EQ(field(d, "draining"), "true");
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "draining"), "true");
  expect_capacity_refusal(call("POST", "/v1/sandboxes", small), "is draining");
  EXPECT_EQ(sandbox_total(), 1u);
  auto out = exec(g.id, "echo", {"still here"});
  EXPECT_EQ(out.stdout_text, "still here\n") << "a draining node's guests run on";
  auto undone = call("DELETE", "/v1/drain");
  ASSERT_EQ(undone.status, 200u) << undone.body;
  EXPECT_EQ(field(undone, "draining"), "false");
  create(small);
}

TEST_F(control_plane_capacity, drain_needs_the_key_like_every_route) {
  stop();
  api_key_ = "drain-key";
  start({"--api-key", api_key_});
  http_client anonymous{cp_->port()};
  EXPECT_EQ(anonymous.call("POST", "/v1/drain").status, 401u);
  EXPECT_EQ(anonymous.call("DELETE", "/v1/drain").status, 401u);
  EXPECT_EQ(anonymous.call("GET", "/v1/capacity").status, 401u);
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "draining"), "false");
  EXPECT_EQ(call("POST", "/v1/drain").status, 200u);
  EXPECT_EQ(field(call("GET", "/v1/capacity"), "draining"), "true");
}

TEST_F(control_plane_capacity, a_bad_workspace_pool_size_is_refused_at_start) {
  test_support::temp_dir other{"guestflow-cp-test"};
  auto state = (other.path() / "s").string();
  for (std::string bad : {"x", "17", "-1", "2x", "2 2"}) {
    auto o = control_plane_process::run_to_exit({"control-plane", "--state-dir", state},
                                                {{"GUESTFLOW_WORKSPACE_POOL", bad}});
    EXPECT_EQ(o.status, 2) << bad << ": " << o.stderr_text;
    EXPECT_NE(o.stderr_text.find(
                  "GUESTFLOW_WORKSPACE_POOL: expected an integer in 0..16, got '" + bad + "'"),
              std::string::npos)
        << o.stderr_text;
  }
}

/// Its soft descriptor limit as /proc/PID/limits says it ("Max open files  SOFT  HARD").
std::pair<std::string, std::string> open_files_limit(pid_t pid) {
  std::ifstream in{"/proc/" + std::to_string(pid) + "/limits"};
  for (std::string line; std::getline(in, line);)
    if (line.rfind("Max open files", 0) == 0) {
      std::istringstream fields{line.substr(14)};
      std::string soft, hard;
      fields >> soft >> hard;
      return {soft, hard};
    }
  return {};
}

TEST_F(control_plane_capacity, the_daemon_takes_the_hard_descriptor_limit) {
  rlimit mine{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &mine), 0);
  // Started with a soft limit below the hard one (it inherits ours), as from a login shell.
  rlimit low = mine;
  low.rlim_cur = std::min<rlim_t>(mine.rlim_max / 2, 512);
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  test_support::temp_dir other{"guestflow-cp-test"};
  std::optional<control_plane_process> cp;
  try {
    cp.emplace(other.path() / "s");
  } catch (...) {
    ::setrlimit(RLIMIT_NOFILE, &mine);
    throw;
  }
  ::setrlimit(RLIMIT_NOFILE, &mine);
  auto [soft, hard] = open_files_limit(cp->pid());
  EXPECT_FALSE(hard.empty());
  EXPECT_EQ(soft, hard) << "a guest holds a pidfd and its calls' pipes and sockets";
  EXPECT_NE(soft, std::to_string(low.rlim_cur));
}

TEST_F(control_plane_capacity, bad_capacity_and_fleet_flags_are_refused_at_start) {
  test_support::temp_dir other{"guestflow-cp-test"};
  auto state = (other.path() / "s").string();
  struct refusal {
    std::vector<std::string> flags;
    std::string needle;
  };
  for (const auto& r : std::vector<refusal>{
           {{"--max-guests", "0"}, "--max-guests: expected an integer in 1..16384"},
           {{"--max-guests", "16385"}, "--max-guests"},
           {{"--memory-budget-mb", "lots"}, "--memory-budget-mb"},
           {{"--memory-budget-mb", "0"}, "--memory-budget-mb"},
           {{"--node", "a/b"}, "--node: expected 1 to 63"},
           {{"--destroyed-retention-hours", "-1"}, "--destroyed-retention-hours"},
           {{"--idle-timeout-seconds", "0"}, "--idle-timeout-seconds"},
           {{"--advertise", "http://127.0.0.1:1"}, "--advertise needs --fleet"},
           {{"--fleet-ttl-seconds", "5"}, "--fleet-ttl-seconds needs --fleet"},
           {{"--fleet", "http://127.0.0.1:2379"}, "--fleet"},
           {{"--fleet", "etcd://127.0.0.1:2379", "--fleet-ttl-seconds", "1"},
            "--fleet-ttl-seconds"},
           {{"--fleet", "etcd://127.0.0.1:2379", "--advertise", "ftp://x"}, "--advertise"},
           {{"--memory-budget-mb", "100", "--warm-pool", "s-1vcpu-64mb=2"},
            "--warm-pool: its 2 guests commit 128 MiB"},
       }) {
    std::vector<std::string> args{"control-plane", "--state-dir", state};
    args.insert(args.end(), r.flags.begin(), r.flags.end());
    auto o = control_plane_process::run_to_exit(args);
    EXPECT_EQ(o.status, 2) << r.flags[0] << ": " << o.stderr_text;
    EXPECT_NE(o.stderr_text.find(r.needle), std::string::npos)
        << "expected '" << r.needle << "' in " << o.stderr_text;
    EXPECT_EQ(o.stdout_text, "") << "a refused start never listens";
  }
}

} // namespace
} // namespace guestflow::testing

namespace guestflow::testing {

TEST_F(control_plane_capacity, out_of_descriptors_it_waits_to_accept_and_then_serves) {
  expect_it_waits_to_accept_out_of_descriptors(cp_->pid(), client(), "/v1/capacity");
}

} // namespace guestflow::testing
