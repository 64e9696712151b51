// The host's state-dir file system full: no caller ever sees success for data that was lost.
// The state dir is a small ext4 file system of its own (an image in the test's temp dir on a
// loop device), so the test fills it for real: a disposable guest's write the host cannot
// hold (a `dd` without fsync, which exits 0) is answered `guest_failed` /
// `workspace_io_error` and the guest is failed and removed; a persistent guest's workspace
// is reserved at create, and a create the host cannot reserve is refused with `capacity`;
// under the file system's floor every create is refused; nothing is left behind, and once
// the space returns a guest runs again.
#include "common/unique_fd.hpp"
#include "tests/integration/control_plane/fixture.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr uint64_t mib = uint64_t{1} << 20;

int sh(const std::string& cmd) {
  return std::system(cmd.c_str());
}

/// A control plane whose state dir is a 512 MiB ext4 file system of its own.
class disk_full : public control_plane_test {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    fs::create_directories(state_dir_);
    image_ = dir_.path() / "state.ext4";
    ASSERT_EQ(sh("truncate -s 512M " + image_.string() + " && mke2fs -q -F -t ext4 -m 0 " +
                 image_.string() + " && mount -o loop " + image_.string() + " " +
                 state_dir_.string()),
              0);
    mounted_ = true;
    start();
  }

  void TearDown() override {
    unfill();
    control_plane_test::TearDown();
    cp_.reset();
    if (mounted_) EXPECT_EQ(sh("umount " + state_dir_.string()), 0) << "a mount is still busy";
  }

  uint64_t free_bytes() const {
    struct statvfs st {};
    EXPECT_EQ(::statvfs(state_dir_.c_str(), &st), 0);
    return uint64_t(st.f_bavail) * st.f_frsize;
  }

  /// Fills the state dir's file system until `leave` bytes are free (allocated blocks, not a
  /// sparse file: fallocate, then writes for the last bytes).
  void fill(uint64_t leave) {
    unique_fd f{::open(filler().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)};
    ASSERT_TRUE(f);
    struct stat st {};
    ASSERT_EQ(::fstat(f.get(), &st), 0);
    auto free = free_bytes();
    if (free > leave + 4 * mib)
      ASSERT_EQ(::fallocate(f.get(), 0, st.st_size, off_t(free - leave - 4 * mib)), 0)
          << std::strerror(errno);
    std::string block(64 * 1024, 'x');
    while (free_bytes() > leave)
      if (::write(f.get(), block.data(), block.size()) < 0) break; // ENOSPC: full
    ASSERT_EQ(::fsync(f.get()), 0);
  }

  void unfill() { ::unlink(filler().c_str()); }

  fs::path filler() const { return state_dir_ / "filler"; }

  /// Guest directories left under the state dir.
  size_t guest_dirs() const { return workspace_count(); }

  fs::path image_;
  bool mounted_ = false;
};

TEST_F(disk_full, a_write_the_full_host_dropped_is_a_typed_error_never_a_success) {
  auto g = create();
  ASSERT_FALSE(g.id.empty());
  fill(0);
  ASSERT_LT(free_bytes(), 1 * mib);
  // 40 MiB into the 1 GiB workspace, no fsync: dd itself exits 0 (the kernel took the
  // pages); only the write-back finds no room on the host.
  auto r = exec_reply(g.id, "sh",
                      {"-c", "dd if=/dev/urandom of=/workspace/data bs=1M count=40 2>&1 && "
                             "echo written"});
  expect_refusal(r, 502, "workspace_io_error");
  EXPECT_NE(r.body.find("the command exited 0"), std::string::npos) << r.body;
  // The guest is failed and gone: no later call reads what was lost.
  EXPECT_EQ(view(g.id).status, sandbox_status::failed);
  auto seen = call("GET", "/v1/sandboxes/" + g.id);
  EXPECT_NE(seen.body.find(R"("note":"workspace_io_error)"), std::string::npos) << seen.body;
  EXPECT_TRUE(guest_pids(g.id).empty());
  auto later = exec_reply(g.id, "true");
  EXPECT_GE(later.status, 400u) << later.body;
  EXPECT_NE(later.body.find("sandbox is failed"), std::string::npos) << later.body;
  EXPECT_TRUE(eventually([&] { return guest_dirs() == 0; }, 30s)) << "its workspace was left";
  // The space returns: guests run again.
  unfill();
  auto again = create();
  auto ok = exec(again.id, "sh",
                 {"-c", "dd if=/dev/urandom of=/workspace/data bs=1M count=8 2>/dev/null && "
                        "wc -c < /workspace/data"});
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.stdout_text, "8388608\n");
  EXPECT_FALSE(ok.error) << *ok.error;
}

TEST_F(disk_full, a_streamed_exec_whose_writes_were_lost_ends_with_an_error_not_exit_0) {
  auto g = create();
  ASSERT_FALSE(g.id.empty());
  fill(0);
  auto r = call("POST", "/v1/sandboxes/" + g.id + "/exec?stream=true",
                exec_body("sh", {"-c", "dd if=/dev/urandom of=/workspace/data bs=1M count=40 "
                                       "2>/dev/null; echo done"}));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_NE(r.body.find(R"("stdout":"done\n")"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"({"error":"workspace_io_error)"), std::string::npos) << r.body;
  // The exit line goes on with the program's exec_ms.
  EXPECT_NE(r.body.find(R"({"exit_code":74,)"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find(R"({"exit_code":0,)"), std::string::npos) << r.body;
  EXPECT_EQ(view(g.id).status, sandbox_status::failed);
}

TEST_F(disk_full,
       a_persistent_workspace_is_reserved_and_a_create_the_host_cannot_hold_refused) {
  // s-1vcpu-64mb: a 256 MiB workspace, reserved whole on the 512 MiB file system.
  const std::string persistent = R"({"shape":"s-1vcpu-64mb","persistent":true})";
  auto before = free_bytes();
  auto kept = create(persistent);
  ASSERT_FALSE(kept.id.empty());
  EXPECT_GE(before - free_bytes(), 250 * mib) << "the workspace's blocks were not reserved";
  // The host full save its floor and a little: the reserved guest still writes its whole
  // workspace, fsync'd and not, with every byte back.
  fill(40 * mib);
  auto w = exec(kept.id, "sh",
                {"-c", "dd if=/dev/urandom of=/workspace/a bs=1M count=100 2>/dev/null && "
                       "dd if=/dev/urandom of=/workspace/b bs=1M count=100 conv=fsync "
                       "2>/dev/null && sync && wc -c /workspace/a /workspace/b"});
  EXPECT_EQ(w.exit_code, 0) << w.stderr_text;
  EXPECT_FALSE(w.error) << *w.error;
  EXPECT_NE(w.stdout_text.find("209715200 total"), std::string::npos) << w.stdout_text;
  // Another persistent guest cannot be reserved: refused, nothing half made.
  auto dirs = guest_dirs();
  auto r = call("POST", "/v1/sandboxes", persistent);
  expect_refusal(r, 429, "insufficient storage"); // 429: capacity
  EXPECT_EQ(guest_dirs(), dirs);
  EXPECT_EQ(sandbox_total(), 1u);
}

TEST_F(disk_full, under_the_floor_every_create_is_refused_until_space_returns) {
  fill(2 * mib); // the floor: 5% of 512 MiB
  auto r = call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb"})");
  expect_refusal(r, 429, "under its floor"); // 429: capacity
  EXPECT_EQ(guest_dirs(), 0u);
  EXPECT_EQ(sandbox_total(), 0u);
  unfill();
  auto g = create();
  EXPECT_EQ(exec(g.id, "true").exit_code, 0);
}

} // namespace
} // namespace guestflow::testing
