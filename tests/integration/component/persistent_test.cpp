// `guestflow component --reuse flow` on persistent guests (issue 19), as a user runs it
// against the real local control plane with real guests: the count carries over a stop (no
// process left, memory released), a simulated host reboot (control plane SIGKILLed and every
// guest process killed), then the idle TTL stops the guest and the next run starts it again.
#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/guest_programs.hpp"

#include <csignal>
#include <sys/wait.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

using test_support::counter_program;

class persistent_component_test : public runtime_fixture {
protected:
  /// One keyed run of the counter program; its stdout.
  std::string count() {
    auto r = cli({"component", "--flow-id", "flow-p", "--component-id", "counter", "--reuse",
                  "flow", "--python", file("count.py", counter_program)});
    EXPECT_EQ(r.status, 0) << r.stderr_text;
    return r.stdout_text;
  }

  http_reply api(const std::string& method, const std::string& target) {
    http_client http{cp->port()};
    return http.call(method, target);
  }

  sandbox_view view(const std::string& id) {
    auto reply = api("GET", "/v1/sandboxes/" + id);
    EXPECT_EQ(reply.status, 200u) << reply.body;
    auto env = decode<jsend>(reply.body);
    if (!env) return {};
    auto v = decode<sandbox_view>(env->data.text);
    return v ? *v : sandbox_view{};
  }

  uint64_t committed_mib() {
    auto r = api("GET", "/v1/capacity");
    const std::string key = "\"memory_committed_mib\":";
    auto at = r.body.find(key);
    if (at == std::string::npos) {
      ADD_FAILURE() << r.body;
      return 0;
    }
    return std::stoull(r.body.substr(at + key.size()));
  }
};

TEST_F(persistent_component_test, counts_carry_over_stop_reboot_and_idle_ttl) {
  ASSERT_EQ(count(), "1\n");
  ASSERT_EQ(count(), "2\n");
  auto guests = live_guests();
  ASSERT_EQ(guests.size(), 1u);
  auto id = guests[0].id;
  auto v = view(id);
  EXPECT_TRUE(v.persistent) << "a reusable guest on a local control plane is persistent";
  EXPECT_FALSE(v.auto_pause_after_seconds);
  ASSERT_TRUE(v.idle_ttl_seconds);
  EXPECT_GE(*v.idle_ttl_seconds, 60u);
  ASSERT_FALSE(guest_pids(id).empty());
  auto held = committed_mib();
  ASSERT_GT(held, 0u);

  // Stop: no guest process left, its memory no longer committed.
  auto stopped = api("POST", "/v1/sandboxes/" + id + "/stop");
  ASSERT_EQ(stopped.status, 200u) << stopped.body;
  EXPECT_EQ(view(id).status, sandbox_status::stopped);
  EXPECT_TRUE(guest_pids(id).empty());
  EXPECT_EQ(committed_mib(), 0u);
  ASSERT_EQ(count(), "3\n"); // started by the run's first call
  EXPECT_EQ(view(id).status, sandbox_status::running);

  // A simulated reboot: the control plane SIGKILLed, every guest process killed.
  ::kill(cp->pid(), SIGKILL);
  cp.reset();
  for (int pid : guest_pids(id))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return guest_pids(id).empty(); }));
  // Restarted with the idle timers scaled (test-only): its idle TTL becomes ~2 s.
  cp = std::make_unique<control_plane_process>(
      dir.path() / "cp", std::vector<std::string>{"--auto-pause-scale", "0.02"});
  EXPECT_EQ(view(id).status, sandbox_status::stopped);
  ASSERT_EQ(count(), "4\n");
  EXPECT_EQ(live_guests().size(), 1u);

  // Idle TTL: stopped without anyone asking; the next run counts on.
  ASSERT_TRUE(test_support::eventually(
      [&] { return view(id).status == sandbox_status::stopped; }, 30s, 50ms));
  EXPECT_TRUE(guest_pids(id).empty());
  ASSERT_EQ(count(), "5\n");
  EXPECT_EQ(live_guests().at(0).id, id);
}

TEST_F(persistent_component_test, reap_never_deletes_a_guest_another_process_is_using) {
  ASSERT_EQ(count(), "1\n");
  auto id = live_guests().at(0).id;
  // Another process's run holds an exec in the guest for a while.
  auto sleeper = file("sleep.py", "import time\ntime.sleep(4)\nprint('slept')\n");
  pid_t run = start_cli({"component", "--flow-id", "flow-p", "--component-id", "counter",
                         "--reuse", "flow", "--python", sleeper},
                        env());
  ASSERT_GT(run, 0);
  ASSERT_TRUE(
      test_support::eventually([&] { return view(id).calls_in_progress > 0; }, 30s, 20ms));
  auto busy = cli({"reap", "--reusable", "--idle-longer-than", "0"});
  EXPECT_EQ(busy.status, 0) << busy.stderr_text;
  EXPECT_EQ(busy.stdout_text, "deleted 0\n");
  EXPECT_EQ(view(id).status, sandbox_status::running);
  int st = 0;
  ASSERT_TRUE(
      test_support::eventually([&] { return ::waitpid(run, &st, WNOHANG) == run; }, 60s, 20ms));
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  // Idle now (its last use more than 0 s ago): reaped.
  std::string said;
  test_support::eventually(
      [&] {
        return (said = cli({"reap", "--reusable", "--idle-longer-than", "0"}).stdout_text) ==
               "deleted 1\n";
      },
      20s, 200ms);
  EXPECT_EQ(said, "deleted 1\n");
  EXPECT_TRUE(wait_for_live(0));
}

} // namespace
