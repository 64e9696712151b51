// Persistent guests on a fleet (issue 19, host loss): two real control planes share a
// workspace root and an etcd; a `--reuse flow` component's guest lives on one of them. When
// that node is lost (SIGKILL, its guest's processes killed too: a host gone), the next run
// cold-boots the guest on the other node from the kept workspace once the lost node's lease
// has expired, and the lost node, restarted, forgets the guest instead of starting it.
#include "fleet/etcd_client.hpp"
#include "messages/fleet.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/fleet/fleet_fixture.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/guest_programs.hpp"
#include "tests/support/proc.hpp"

#include <csignal>
#include <iostream>
#include <sys/stat.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

using test_support::counter_program;

/// Pids of the processes in guest `id`'s cgroups (`…/guestflow/<id>`).
std::vector<int> guest_pids(const std::string& id) {
  return test_support::pids_where("cgroup", [&id](const std::string& text) {
    return text.find("/guestflow/" + id + "\n") != std::string::npos ||
           text.find("/guestflow/" + id + "/") != std::string::npos;
  });
}

class persistent_fleet_test : public fleet_fixture {
protected:
  std::unique_ptr<test_support::etcd_process> etcd =
      std::make_unique<test_support::etcd_process>();
  std::filesystem::path root = dir.path() / "shared";
  std::shared_ptr<fleet::etcd_client> etcd_client;

  void SetUp() override {
    std::filesystem::create_directories(root);
    ::chmod(root.c_str(), 0711);
    auto c = fleet::etcd_client::make(etcd->url());
    ASSERT_TRUE(c);
    etcd_client = *c;
  }

  std::vector<std::string> node_args() const {
    return {"--fleet", etcd->url(),        "--fleet-ttl-seconds",
            "2",       "--workspace-root", root.string()};
  }

  size_t registered() const {
    auto r = etcd_client->range(std::string{fleet_nodes_prefix});
    return r ? r->size() : 0;
  }

  /// One keyed run of the counter program through the fleet (etcd); its stdout.
  std::string count() {
    cli_run run{{"component", "--flow-id", "flow-f", "--component-id", "counter", "--reuse",
                 "flow", "--python", file("count.py", counter_program)},
                env("runtime", {{"GUESTFLOW_FLEET", etcd->url()}}),
                dir.path()};
    auto o = run.wait(120s);
    EXPECT_EQ(o.status, 0) << o.err;
    return o.out;
  }

  /// The owner key's node ("" when absent).
  std::string owner_of(const std::string& name) const {
    auto kv = etcd_client->get("/guestflow/owners/" + name);
    if (!kv || !kv->has_value()) return "";
    return (*kv)->value.substr(0, (*kv)->value.find(' '));
  }
};

TEST_F(persistent_fleet_test, a_lost_nodes_guest_cold_boots_on_the_other_node_and_stays_there) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_EQ(drain(1, true), 200u); // the guest is made on node A
  ASSERT_EQ(count(), "1\n");
  ASSERT_EQ(drain(1, false), 200u);
  for (auto want : {"2\n", "3\n", "4\n"})
    ASSERT_EQ(count(), want);
  auto on_a = live(0);
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_TRUE(live(1).empty());
  const auto id_a = on_a[0].id, name = on_a[0].name;
  EXPECT_TRUE(on_a[0].persistent);
  EXPECT_EQ(owner_of(name), "node-a");
  EXPECT_TRUE(std::filesystem::exists(root / name / "spec.json"));
  // Fenced: while A's lease is live, node B refuses to build the guest (nothing made there).
  {
    http_client http{nodes[1]->port()};
    auto refused = http.call("POST", "/v1/sandboxes",
                             R"({"shape":")" + on_a[0].shape +
                                 R"(","persistent":true,"name":")" + name + R"("})");
    EXPECT_EQ(refused.status, 409u) << refused.body;
    EXPECT_NE(refused.body.find("is owned by node node-a"), std::string::npos) << refused.body;
    EXPECT_TRUE(live(1).empty());
    EXPECT_EQ(owner_of(name), "node-a");
  }

  // Host loss: node A and its guest's processes killed.
  kill_node(0);
  for (int pid : guest_pids(id_a))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return guest_pids(id_a).empty(); }, 20s));
  // Never while A's lease is live: the owner key goes with it (TTL 2 s).
  ASSERT_TRUE(test_support::eventually([&] { return owner_of(name).empty(); }, 20s, 50ms));
  auto cold = std::chrono::steady_clock::now();
  ASSERT_EQ(count(), "5\n"); // cold-booted on node B from the kept workspace
  std::cerr << "the run after the loss took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - cold)
                   .count()
            << " ms\n";
  auto on_b = live(1);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_b[0].name, name);
  EXPECT_EQ(on_b[0].status, sandbox_status::running);
  EXPECT_EQ(owner_of(name), "node-b");

  // Node A back: it finds the guest owned by B and forgets it (never starts it again).
  restart_node(0);
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_TRUE(test_support::eventually([&] { return live(0).empty(); }, 20s, 100ms));
  for (auto& v : records(0)) {
    if (v.id == id_a) {
      EXPECT_EQ(v.status, sandbox_status::destroyed);
    }
  }
  EXPECT_TRUE(guest_pids(id_a).empty());
  EXPECT_EQ(count(), "6\n");
  EXPECT_EQ(live(1).at(0).status, sandbox_status::running);
  EXPECT_EQ(owner_of(name), "node-b");
  EXPECT_TRUE(std::filesystem::exists(root / name / "spec.json")) << "B's workspace kept";
}

TEST_F(persistent_fleet_test,
       a_takeover_whose_kept_image_was_removed_is_not_found_and_frees_it) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string body = R"({"shape":"s-1vcpu-256mb","persistent":true,"name":"kept-1"})";
  auto made = http_client{nodes[0]->port()}.call("POST", "/v1/sandboxes", body);
  ASSERT_EQ(made.status, 200u) << made.body;
  auto id_a = live(0).at(0).id;
  ASSERT_TRUE(std::filesystem::exists(root / "kept-1" / "workspace.ext4"));
  kill_node(0);
  for (int pid : guest_pids(id_a))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return owner_of("kept-1").empty(); }, 20s, 50ms));
  std::filesystem::remove(root / "kept-1" / "workspace.ext4");
  auto refused = http_client{nodes[1]->port()}.call("POST", "/v1/sandboxes", body);
  EXPECT_EQ(refused.status, 404u) << refused.body;
  EXPECT_NE(refused.body.find("workspace image"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("is gone"), std::string::npos) << refused.body;
  EXPECT_TRUE(live(1).empty());
  EXPECT_EQ(owner_of("kept-1"), "") << "a failed takeover lets ownership go";
  EXPECT_TRUE(std::filesystem::exists(root / "kept-1" / "spec.json")) << "nothing else lost";
  restart_node(0); // its record goes with TearDown
}

TEST_F(persistent_fleet_test, a_missing_or_unfleeted_workspace_root_is_refused_at_start) {
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> all{"control-plane", "--state-dir",
                                 (dir.path() / "refused").string()};
    all.insert(all.end(), args.begin(), args.end());
    cli_run r{all, {}, dir.path()};
    return r.wait(30s);
  };
  auto missing = run({"--fleet", etcd->url(), "--workspace-root", (root / "nope").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(
      missing.err.find("--workspace-root: " + (root / "nope").string() + " does not exist"),
      std::string::npos)
      << missing.err;
  auto alone = run({"--workspace-root", root.string()});
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--workspace-root needs --fleet"), std::string::npos) << alone.err;
}

} // namespace
