// Restarts: guests are not the server's children; they outlive it and are re-adopted,
// and records of guests that died meanwhile are reaped. One server per state dir.
#include "tests/integration/control_plane/fixture.hpp"

#include <signal.h>

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
