// A stall of the host is not the program's time: the control plane SIGSTOPped for longer
// than a program's timeout while the program (3 s) runs and ends in its guest does not
// turn the run into a `timeout` — `guestflow code` against this control plane reports the
// program's own exit and output once the control plane runs again.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/slurp.hpp"

#include <fstream>
#include <signal.h>
#include <thread>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;
using control_plane_stall = control_plane_test;

/// True while a process of guest `id` runs `python3`.
bool runs_python(const std::string& id) {
  for (int pid : guest_pids(id))
    if (test_support::slurp("/proc/" + std::to_string(pid) + "/cmdline").find("python3") !=
        std::string::npos)
      return true;
  return false;
}

TEST_F(control_plane_stall, a_stopped_control_plane_does_not_make_a_program_time_out) {
  auto program = dir_.path() / "three_seconds.py";
  std::ofstream{program} << "import time\nprint('start', flush=True)\ntime.sleep(3)\n"
                            "print('done')\n";
  control_plane_process::outcome run;
  std::thread runner{[&] {
    run = control_plane_process::run_to_exit(
        {"code", "--timeout", "10", "--json", program.string()},
        {{"GUESTFLOW_CONTROL_PLANE_URL", "http://127.0.0.1:" + std::to_string(cp_->port())}},
        std::chrono::seconds{120});
  }};
  std::string id;
  ASSERT_TRUE(eventually(
      [&] {
        auto list = data<sandbox_list>(call("GET", "/v1/sandboxes"));
        for (const auto& s : list.data)
          if (runs_python(s.id)) id = s.id;
        return !id.empty();
      },
      60s))
      << "the program never started";
  // The stall: longer than the program's timeout, the program ends inside it.
  auto stall = 14s;
  auto stopped_at = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(cp_->pid(), SIGSTOP), 0);
  bool ended = eventually([&] { return !runs_python(id); }, 30s);
  std::this_thread::sleep_until(stopped_at + stall); // the fault's length, not a wait
  ASSERT_EQ(::kill(cp_->pid(), SIGCONT), 0);
  runner.join();
  ASSERT_TRUE(ended) << "the program did not end while the control plane was stopped";
  EXPECT_EQ(run.status, 0) << run.stdout_text << run.stderr_text;
  EXPECT_NE(run.stdout_text.find(R"("exit_code":0)"), std::string::npos) << run.stdout_text;
  EXPECT_NE(run.stdout_text.find(R"("stdout":"start\ndone\n")"), std::string::npos)
      << run.stdout_text;
  EXPECT_EQ(run.stderr_text.find("timeout"), std::string::npos) << run.stderr_text;
}

} // namespace
} // namespace guestflow::testing
