// Workspace disk quotas through the real control plane (a child process): create reports
// the shape's disk, PUT …/files refuses a body that cannot fit with 413 and writes nothing,
// and no image or loop device outlives a guest — deleted, reaped after a kill -9 of the
// server, or deleted by the restarted server.

#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/slurp.hpp"

#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sstream>

namespace guestflow::testing {
namespace {

namespace fs = std::filesystem;

class workspace_quota_cp : public control_plane_test {
protected:
  /// Fills guest `id`'s workspace (a file /workspace/fill) to all but `left` bytes.
  void fill_all_but(const std::string& id, uint64_t left) {
    auto fill =
        exec(id, "/bin/sh",
             {"-c", "head -c $(( $(stat -f -c '%a*%S' /workspace) - " + std::to_string(left) +
                        " )) /dev/zero > /workspace/fill && sync && echo filled"});
    ASSERT_EQ(fill.stdout_text, "filled\n") << fill.stderr_text;
  }
};

constexpr const char* small_shape = R"({"shape":"s-1vcpu-64mb"})"; // 256 MiB of disk

using test_support::slurp;

/// Loop devices bound to a file whose path contains `needle`.
size_t loops_backed_by(const std::string& needle) {
  size_t n = 0;
  std::error_code ec_;
  for (const auto& e : fs::directory_iterator{"/sys/block", ec_})
    if (e.path().filename().string().rfind("loop", 0) == 0 &&
        slurp(e.path() / "loop" / "backing_file").find(needle) != std::string::npos)
      ++n;
  return n;
}

TEST_F(workspace_quota_cp, create_reports_the_enforced_disk) {
  auto g = create(small_shape);
  EXPECT_EQ(g.disk_mib, 256u);
  auto r = exec(g.id, "python3",
                {"-c", "import os; s = os.statvfs('/workspace'); print(s.f_blocks * s.f_frsize "
                       ">> 20 <= 256 and s.f_blocks * s.f_frsize >> 20 > 230)"});
  EXPECT_EQ(r.stdout_text, "True\n") << r.stderr_text;
}

TEST_F(workspace_quota_cp, a_put_that_cannot_fit_is_refused_and_writes_nothing) {
  auto g = create(small_shape);
  ASSERT_EQ(put_file(g.id, "/workspace/keep", "kept").status, 200u);
  // Fill the workspace to all but a few MiB, then upload 16 MiB.
  ASSERT_NO_FATAL_FAILURE(fill_all_but(g.id, 4 << 20));
  const std::string body(16 << 20, 'x');
  auto r = put_file(g.id, "/workspace/new/big", body);
  expect_refusal(r, 413, "do not fit");
  expect_refusal(r, 413, "quota");
  r = put_file(g.id, "/workspace/keep", body);
  expect_refusal(r, 413, "do not fit");
  auto ls = exec(g.id, "/bin/sh", {"-c", "cat /workspace/keep; ls /workspace"});
  EXPECT_EQ(ls.stdout_text, "keptfill\nkeep\n")
      << "a refused PUT must neither truncate nor create anything";
  // What fits is still accepted.
  EXPECT_EQ(put_file(g.id, "/workspace/small", std::string(1 << 20, 'y')).status, 200u);
}

// A body of one chunk or less whose client sends no Expect: 100-continue is read first, then
// checked, opened and written in one worker task: refused for room the same way.
TEST_F(workspace_quota_cp, a_small_put_that_cannot_fit_is_refused_and_writes_nothing) {
  auto g = create(small_shape);
  ASSERT_EQ(put_file(g.id, "/workspace/keep", "kept").status, 200u);
  ASSERT_NO_FATAL_FAILURE(fill_all_but(g.id, 64 << 10));
  const std::string body(200 << 10, 'x'); // under the 256 KiB chunk, over what is free
  expect_refusal(put_file(g.id, "/workspace/new", body), 413, "do not fit");
  expect_refusal(put_file(g.id, "/workspace/keep", body), 413, "do not fit");
  auto ls = exec(g.id, "/bin/sh", {"-c", "cat /workspace/keep; ls /workspace"});
  EXPECT_EQ(ls.stdout_text, "keptfill\nkeep\n")
      << "a refused PUT must neither truncate nor create anything";
  EXPECT_EQ(put_file(g.id, "/workspace/small", std::string(1000, 'y')).status, 200u);
  EXPECT_EQ(exec(g.id, "/bin/sh", {"-c", "wc -c < /workspace/small"}).stdout_text, "1000\n");
}

TEST_F(workspace_quota_cp, no_image_or_loop_device_outlives_a_guest) {
  const auto guests = state_dir_ / "guests";
  auto deleted = create(small_shape);
  auto live = create(small_shape);
  auto dies = create(small_shape);
  for (const auto* g : {&deleted, &live, &dies})
    ASSERT_EQ(put_file(g->id, "/workspace/x", "x").status, 200u);
  EXPECT_EQ(loops_backed_by(guests.string()), 3u);

  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + deleted.id).status, 200u);
  EXPECT_TRUE(eventually([&] { return !fs::exists(guests / deleted.id); }));

  // The server dies with -9; one guest's processes die while it is down (its loop device
  // goes with them); the restarted server reaps that one and keeps the other.
  ::kill(cp_->pid(), SIGKILL);
  for (int pid : guest_pids(dies.id))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return guest_pids(dies.id).empty(); }));
  start();
  EXPECT_TRUE(eventually([&] { return !fs::exists(guests / dies.id); }))
      << "the reconciler removes a dead guest's image";
  EXPECT_EQ(exec(live.id, "/bin/cat", {"/workspace/x"}).stdout_text, "x");
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + live.id).status, 200u);
  EXPECT_TRUE(eventually([&] { return !fs::exists(guests / live.id); }));
  EXPECT_TRUE(eventually([&] { return loops_backed_by(guests.string()) == 0; }))
      << loops_backed_by(guests.string()) << " loop devices still bound below " << guests;
}

} // namespace
} // namespace guestflow::testing
