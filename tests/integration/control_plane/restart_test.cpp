// Restarts: guests are not the server's children; they outlive it and are re-adopted,
// and records of guests that died meanwhile are reaped. One server per state dir.
#include "tests/integration/control_plane/fixture.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using control_plane_restart = control_plane_test;

TEST_F(control_plane_restart, keeps_running_guests_and_reaps_dead_ones) {
  auto keeper =
      create(R"({"shape":"s-1vcpu-256mb","name":"keeper","envs":{"MOTTO":"still here"}})");
  auto victim = create(R"({"shape":"s-1vcpu-256mb","name":"victim"})");
  auto sleeper = create(R"({"shape":"s-1vcpu-256mb","name":"sleeper"})");
  ASSERT_EQ(put_file(keeper.id, "/workspace/state.txt", "kept").status, 200u);
  ASSERT_EQ(view(sleeper.id).status, sandbox_status::running);
  ASSERT_EQ(data<sandbox_view>(call("POST", "/v1/sandboxes/" + sleeper.id + "/pause")).status,
            sandbox_status::paused);

  EXPECT_EQ(stop(), 0) << "SIGTERM should stop the server cleanly";
  EXPECT_FALSE(guest_pids(keeper.id).empty()) << "guests must outlive the control plane";
  // While the server is down, the victim's init dies.
  auto victim_pids = guest_pids(victim.id);
  ASSERT_FALSE(victim_pids.empty());
  for (int pid : victim_pids)
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return guest_pids(victim.id).empty(); }));

  start();
  auto k = view(keeper.id);
  EXPECT_EQ(k.status, sandbox_status::running);
  EXPECT_EQ(k.name, "keeper");
  auto r = exec(keeper.id, "/bin/sh", {"-c", "cat /workspace/state.txt; echo \" $MOTTO\""});
  EXPECT_EQ(r.stdout_text, "kept still here\n");
  EXPECT_EQ(view(victim.id).status, sandbox_status::failed);
  EXPECT_EQ(view(sleeper.id).status, sandbox_status::paused) << "paused stays paused";
  expect_refusal(exec_reply(sleeper.id, "/bin/true"), 409, "sandbox is paused");
  ASSERT_EQ(data<sandbox_view>(call("POST", "/v1/sandboxes/" + sleeper.id + "/resume")).status,
            sandbox_status::running);
  EXPECT_EQ(exec(sleeper.id, "/bin/echo", {"up"}).stdout_text, "up\n");
  // The reaped guest's name is free; the adopted one's is not.
  create(R"({"shape":"s-1vcpu-256mb","name":"victim"})");
  expect_refusal(call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb","name":"keeper"})"),
                 409, "keeper");
}

/// The `guestflow` cgroup parents a control plane puts guests under on this host.
std::vector<std::filesystem::path> guest_cgroup_parents() {
  std::vector<std::filesystem::path> out;
  if (std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers")) // v2
    return {"/sys/fs/cgroup/guestflow"};
  for (auto c : {"memory", "pids", "freezer", "cpu"})
    if (std::filesystem::exists(std::string{"/sys/fs/cgroup/"} + c + "/guestflow"))
      out.push_back(std::string{"/sys/fs/cgroup/"} + c + "/guestflow");
  return out;
}

std::string random_guest_id() {
  std::random_device rd;
  std::string id = "sb-";
  for (int i = 0; i < 16; ++i)
    id += "0123456789abcdef"[rd() % 16];
  return id;
}

// What a control plane killed mid-create or mid-destroy can leave: a guest's cgroup
// directories, empty, named by no record. The next start removes them — only its own
// naming, only empty ones, and only ones older than a create in flight elsewhere could be.
TEST_F(control_plane_restart, a_start_removes_empty_guest_cgroups_no_record_names) {
  auto keeper = create(R"({"shape":"s-1vcpu-256mb","name":"keeper"})");
  EXPECT_EQ(stop(), 0);
  auto parents = guest_cgroup_parents();
  ASSERT_FALSE(parents.empty());
  auto stray = random_guest_id(), fresh = random_guest_id();
  const std::string odd = "sb-not-a-guest-id";
  const timespec an_hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  for (const auto& p : parents) {
    for (const auto& name : {stray, fresh, odd})
      ASSERT_EQ(::mkdir((p / name).c_str(), 0755), 0)
          << p / name << ": " << std::strerror(errno);
    for (const auto& name : {stray, odd}) // left behind long ago
      ASSERT_EQ(::utimensat(AT_FDCWD, (p / name).c_str(), an_hour_ago, 0), 0);
  }
  start();
  for (const auto& p : parents) {
    EXPECT_FALSE(std::filesystem::exists(p / stray)) << p / stray;
    EXPECT_TRUE(std::filesystem::exists(p / fresh)) << "maybe a create in flight elsewhere";
    EXPECT_TRUE(std::filesystem::exists(p / odd)) << "not a guest id";
    EXPECT_TRUE(std::filesystem::exists(p / keeper.id)) << "a live guest's";
    ::rmdir((p / fresh).c_str());
    ::rmdir((p / odd).c_str());
  }
  EXPECT_EQ(exec(keeper.id, "/bin/echo", {"up"}).stdout_text, "up\n");
}

TEST_F(control_plane_restart, a_second_server_on_the_same_state_dir_is_refused) {
  auto o = control_plane_process::run_to_exit(
      {"control-plane", "--listen", "127.0.0.1:0", "--state-dir", state_dir_.string()});
  EXPECT_EQ(o.status, 1) << o.stderr_text;
  EXPECT_NE(o.stderr_text.find("already serves state dir"), std::string::npos) << o.stderr_text;
  EXPECT_EQ(o.stdout_text, "");
  // The first one is unaffected.
  EXPECT_EQ(call("GET", "/v1/whoami").status, 200u);
}

} // namespace
} // namespace guestflow::testing
