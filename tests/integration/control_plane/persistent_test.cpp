// Persistent guests on the wire, with real guests: stop (no process left, memory no longer
// committed, workspace kept), start and wake on use from the kept workspace, a restart whose
// guests' processes were killed (a simulated reboot), delete_after_stop, and the typed
// refusals (unknown, ephemeral, destroyed, a removed image, TTLs without persistence).
#include "tests/integration/control_plane/fixture.hpp"

#include <csignal>
#include <filesystem>
#include <thread>

namespace guestflow::testing {
namespace {

using control_plane_persistent = both_kinds_test;
using namespace std::chrono_literals;

const std::string persistent_body =
    R"({"shape":"s-1vcpu-256mb","persistent":true,"idle_ttl_seconds":0})";

/// `memory_committed_mib` of `GET /v1/capacity`.
uint64_t committed(const http_reply& r) {
  const std::string key = "\"memory_committed_mib\":";
  auto at = r.body.find(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no memory_committed_mib in " << r.body;
    return 0;
  }
  return std::stoull(r.body.substr(at + key.size()));
}

std::string ok_stdout(const exec_result& r) {
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  return r.stdout_text;
}

TEST_P(control_plane_persistent,
       stop_frees_processes_and_memory_and_start_keeps_the_workspace) {
  auto g = create(persistent_body);
  auto v = view(g.id);
  EXPECT_TRUE(v.persistent);
  EXPECT_EQ(v.idle_ttl_seconds, 0u);
  EXPECT_EQ(v.delete_after_stop_seconds, 14u * 24 * 3600); // the default
  ASSERT_EQ(ok_stdout(exec(g.id, "/bin/sh", {"-c", "echo kept > /workspace/f && echo ok"})),
            "ok\n");
  EXPECT_TRUE(view(g.id).last_used_at);
  ASSERT_FALSE(guest_pids(g.id).empty());
  EXPECT_EQ(committed(call("GET", "/v1/capacity")), 256u);

  auto s = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/stop"));
  EXPECT_EQ(s.status, sandbox_status::stopped);
  EXPECT_TRUE(s.stopped_at);
  EXPECT_TRUE(guest_pids(g.id).empty()) << "a stopped guest has no process left";
  EXPECT_EQ(committed(call("GET", "/v1/capacity")), 0u) << "a stopped guest commits no memory";
  EXPECT_TRUE(std::filesystem::exists(state_dir_ / "guests" / g.id / "workspace.ext4"));
  // Idempotent; pause/resume are not for a stopped guest.
  EXPECT_EQ(data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/stop")).status,
            sandbox_status::stopped);
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/pause"), 409, "stopped");

  auto started = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start"));
  EXPECT_EQ(started.status, sandbox_status::running);
  EXPECT_FALSE(started.stopped_at);
  EXPECT_EQ(started.name, g.name);
  EXPECT_EQ(ok_stdout(exec(g.id, "/bin/cat", {"/workspace/f"})), "kept\n");
  EXPECT_EQ(committed(call("GET", "/v1/capacity")), 256u);
  // Start of a running guest: idempotent.
  EXPECT_EQ(data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start")).status,
            sandbox_status::running);

  // Wake on use: exec and files on a stopped guest start it first.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  EXPECT_EQ(ok_stdout(exec(g.id, "/bin/cat", {"/workspace/f"})), "kept\n");
  EXPECT_EQ(view(g.id).status, sandbox_status::running);
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  auto f = get_file(g.id, "/workspace/f");
  EXPECT_EQ(f.status, 200u) << f.body;
  EXPECT_EQ(f.body, "kept\n");

  // Delete while stopped: works, and takes the workspace with it.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  auto del = data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id));
  EXPECT_EQ(del.status, sandbox_status::destroyed);
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "guests" / g.id));
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/stop"), 409, "destroyed");
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/start"), 409, "destroyed");
}

TEST_P(control_plane_persistent, refusals_are_typed_and_change_nothing) {
  expect_refusal(call("POST", "/v1/sandboxes/sb-nope/stop"), 404, "no sandbox");
  expect_refusal(call("POST", "/v1/sandboxes/sb-nope/start"), 404, "no sandbox");
  expect_refusal(
      call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb","idle_ttl_seconds":5})"), 400,
      "persistent");
  expect_refusal(call("POST", "/v1/sandboxes",
                      R"({"shape":"s-1vcpu-256mb","delete_after_stop_seconds":5})"),
                 400, "persistent");
  EXPECT_EQ(sandbox_total(), 0u);

  auto eph = create();
  EXPECT_FALSE(view(eph.id).persistent);
  expect_refusal(call("POST", "/v1/sandboxes/" + eph.id + "/stop"), 409, "not persistent");
  expect_refusal(call("POST", "/v1/sandboxes/" + eph.id + "/start"), 409, "not persistent");
  EXPECT_EQ(view(eph.id).status, sandbox_status::running);

  // Two starts at once: one builds the guest, the other is told it is starting (409) or,
  // arriving after, finds it running; never two guests.
  auto twice = create(persistent_body);
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + twice.id + "/stop").status, 200u);
  http_reply a, b;
  {
    std::thread t1{[&] { a = call("POST", "/v1/sandboxes/" + twice.id + "/start"); }};
    std::thread t2{[&] { b = call("POST", "/v1/sandboxes/" + twice.id + "/start"); }};
    t1.join();
    t2.join();
  }
  for (const auto* r : {&a, &b})
    EXPECT_TRUE(r->status == 200u ||
                (r->status == 409u && r->body.find("sandbox is starting") != std::string::npos))
        << r->body;
  EXPECT_TRUE(a.status == 200u || b.status == 200u) << a.body << b.body;
  EXPECT_EQ(view(twice.id).status, sandbox_status::running);
  EXPECT_EQ(ok_stdout(exec(twice.id, "/bin/echo", {"1"})), "1\n");
  EXPECT_EQ(committed(call("GET", "/v1/capacity")), 512u) << "the ephemeral guest and this one";
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + twice.id).status, 200u);

  // A stopped guest whose workspace image was removed: start is refused (404), the guest
  // stays stopped, and a delete still works.
  auto g = create(persistent_body);
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  std::filesystem::remove(state_dir_ / "guests" / g.id / "workspace.ext4");
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/start"), 404, "is gone");
  expect_refusal(exec_reply(g.id, "/bin/true"), 404, "is gone");
  auto v = view(g.id);
  EXPECT_EQ(v.status, sandbox_status::stopped);
  EXPECT_TRUE(guest_pids(g.id).empty());
  EXPECT_EQ(committed(call("GET", "/v1/capacity")), 256u) << "only the ephemeral guest";
  EXPECT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
}

TEST_P(control_plane_persistent,
       a_reboot_leaves_persistent_guests_stopped_and_ephemeral_failed) {
  auto g = create(persistent_body);
  auto eph = create();
  ASSERT_EQ(ok_stdout(exec(g.id, "/bin/sh", {"-c", "echo 41 > /workspace/n && echo ok"})),
            "ok\n");
  // A simulated reboot: the control plane SIGKILLed, then every guest process.
  ::kill(cp_->pid(), SIGKILL);
  cp_.reset();
  for (const auto& id : {g.id, eph.id})
    for (int pid : guest_pids(id))
      ::kill(pid, SIGKILL);
  ASSERT_TRUE(
      eventually([&] { return guest_pids(g.id).empty() && guest_pids(eph.id).empty(); }));
  start();
  auto v = view(g.id);
  EXPECT_EQ(v.status, sandbox_status::stopped);
  EXPECT_TRUE(v.stopped_at);
  EXPECT_EQ(view(eph.id).status, sandbox_status::failed);
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "guests" / eph.id));
  // The next use starts it from the kept workspace (checked by e2fsck -p first).
  EXPECT_EQ(ok_stdout(exec(g.id, "/bin/sh", {"-c", "echo $(( $(cat /workspace/n) + 1 ))"})),
            "42\n");
  EXPECT_EQ(view(g.id).status, sandbox_status::running);
}

TEST_P(control_plane_persistent, idle_ttl_stops_and_delete_after_stop_deletes) {
  // Idle TTL: 60 s at the 0.02 scale is 1.2 s; delete_after_stop is never scaled.
  stop();
  start({"--auto-pause-scale", "0.02"});
  auto g = create(
      R"({"shape":"s-1vcpu-256mb","persistent":true,"idle_ttl_seconds":60,"delete_after_stop_seconds":1})");
  ASSERT_EQ(ok_stdout(exec(g.id, "/bin/true")), "");
  ASSERT_TRUE(
      eventually([&] { return view(g.id).status == sandbox_status::stopped; }, 30s, 50ms));
  EXPECT_TRUE(guest_pids(g.id).empty());
  ASSERT_TRUE(
      eventually([&] { return view(g.id).status == sandbox_status::destroyed; }, 30s, 100ms));
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "guests" / g.id));
}

GUESTFLOW_BOTH_KINDS(control_plane_persistent);

} // namespace
} // namespace guestflow::testing
