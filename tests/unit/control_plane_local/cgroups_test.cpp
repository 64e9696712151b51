// The cgroup code of both versions on any host: a temp dir laid out like a cgroup v1 or a
// cgroup v2 file system stands in for /sys/fs/cgroup (the kernel's part — files that appear
// on mkdir, the freezer reaching its state — is played by the test writing those files).
// Real cgroups of this host's version are exercised by tests/integration/guest_backend.

#include "controlplane/local/guests/cgroups.hpp"
#include "tests/support/temp_dir.hpp"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using namespace guestflow;
using namespace guestflow::local;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream{p} << text;
}

std::string read(const fs::path& p) {
  std::ifstream in{p};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A /proc/self/mountinfo line for a v1 hierarchy at `mount_point` with `options`.
std::string mount_line(int n, const std::string& mount_point, const std::string& options) {
  return std::to_string(30 + n) + " 25 0:" + std::to_string(n) + " / " + mount_point +
         " rw,nosuid,nodev,noexec,relatime shared:" + std::to_string(n) +
         " - cgroup cgroup rw," + options + "\n";
}

class fake_v1 : public ::testing::Test {
protected:
  result<cgroup_layout> layout(const std::vector<std::string>& controllers) {
    std::string table = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";
    int n = 1;
    for (const auto& c : controllers) {
      fs::create_directories(root / c); // the hierarchy's mount point
      table += mount_line(n++, (root / c).string(), c);
    }
    // A hierarchy outside the root is not ours.
    table += mount_line(n, "/elsewhere/memory", "memory");
    std::istringstream in{table};
    return cgroup_layout_at(root.string(), false, in);
  }

  test_support::temp_dir dir{"gf-cgroup-v1"};
  fs::path root = dir.path() / "cgroup";
};

class fake_v2 : public ::testing::Test {
protected:
  result<cgroup_layout> layout(const std::string& controllers) {
    write(root / "cgroup.controllers", controllers + "\n");
    std::istringstream none;
    return cgroup_layout_at(root.string(), true, none);
  }

  test_support::temp_dir dir{"gf-cgroup-v2"};
  fs::path root = dir.path() / "cgroup";
};

} // namespace

TEST_F(fake_v1, layout_reads_the_mounted_hierarchies_below_the_root) {
  auto l = layout({"memory", "pids", "freezer", "cpu,cpuacct"});
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_FALSE(l->v2);
  EXPECT_EQ(l->v1_mounts.at("memory"), (root / "memory").string());
  EXPECT_EQ(l->v1_mounts.at("cpu"), (root / "cpu,cpuacct").string());
  EXPECT_EQ(guest_cgroup_dirs(*l, "g1"),
            (std::vector<std::string>{(root / "memory/guestflow/g1").string(),
                                      (root / "pids/guestflow/g1").string(),
                                      (root / "freezer/guestflow/g1").string(),
                                      (root / "cpu,cpuacct/guestflow/g1").string()}));
}

TEST_F(fake_v1, layout_without_a_freezer_is_unavailable) {
  auto l = layout({"memory", "pids"});
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, ec::unavailable);
  EXPECT_NE(l.error().message.find("no cgroup v1 freezer"), std::string::npos)
      << l.error().message;
}

TEST_F(fake_v1, freezer_oom_and_members_read_the_v1_files) {
  auto l = layout({"memory", "pids", "freezer"});
  ASSERT_TRUE(l);
  auto dirs = guest_cgroup_dirs(*l, "g1");
  write(dirs[0] + "/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n");
  write(dirs[0] + "/cgroup.procs", "101\n102\n");
  write(dirs[2] + "/freezer.state", "THAWED\n");
  EXPECT_EQ(oom_kill_count(dirs), 3u);
  EXPECT_EQ(cgroup_pids(dirs[0]), (std::vector<pid_t>{101, 102}));
  EXPECT_FALSE(is_frozen(dirs));
  // The fake freezer reaches a state as soon as it is written (the kernel may take longer).
  auto frozen = set_frozen(dirs, true, std::chrono::milliseconds{100});
  ASSERT_TRUE(frozen) << frozen.error().message;
  EXPECT_EQ(read(dirs[2] + "/freezer.state").substr(0, 6), "FROZEN");
  EXPECT_TRUE(is_frozen(dirs));
}

TEST_F(fake_v1, a_create_that_cannot_write_its_limits_removes_what_it_made) {
  auto l = layout({"memory", "pids", "freezer"});
  ASSERT_TRUE(l);
  // No kernel makes memory.limit_in_bytes appear on mkdir here: the write fails.
  auto made = create_guest_cgroups(*l, "g1", {64u << 20, 64, 1});
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, ec::unavailable);
  EXPECT_NE(made.error().message.find("memory.limit_in_bytes"), std::string::npos)
      << made.error().message;
  for (const auto& d : guest_cgroup_dirs(*l, "g1"))
    EXPECT_FALSE(fs::exists(d)) << d;
}

TEST_F(fake_v2, layout_is_the_root_when_memory_and_pids_are_available) {
  auto l = layout("cpuset cpu io memory hugetlb pids rdma misc");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_TRUE(l->v2);
  EXPECT_EQ(l->v2_root, root.string());
  EXPECT_TRUE(l->v1_mounts.empty());
  EXPECT_EQ(guest_cgroup_dirs(*l, "g1"),
            std::vector<std::string>{(root / "guestflow/g1").string()});
}

TEST_F(fake_v2, layout_without_pids_is_unavailable) {
  auto l = layout("cpu io memory");
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, ec::unavailable);
  EXPECT_NE(l.error().message.find("cgroup v2 lacks the pids controller"), std::string::npos)
      << l.error().message;
}

TEST_F(fake_v2, freezer_oom_and_members_read_the_v2_files) {
  auto l = layout("cpu memory pids");
  ASSERT_TRUE(l);
  auto dirs = guest_cgroup_dirs(*l, "g1");
  write(dirs[0] + "/memory.events", "low 0\nhigh 0\nmax 7\noom 5\noom_kill 2\n");
  write(dirs[0] + "/cgroup.procs", "201\n");
  write(dirs[0] + "/cgroup.freeze", "0\n");
  write(dirs[0] + "/cgroup.events", "populated 1\nfrozen 1\n"); // the kernel's answer, ahead
  EXPECT_EQ(oom_kill_count(dirs), 2u);
  EXPECT_EQ(cgroup_pids(dirs[0]), std::vector<pid_t>{201});
  EXPECT_FALSE(is_frozen(dirs));
  auto frozen = set_frozen(dirs, true, std::chrono::milliseconds{100});
  ASSERT_TRUE(frozen) << frozen.error().message;
  EXPECT_EQ(read(dirs[0] + "/cgroup.freeze").substr(0, 1), "1");
  EXPECT_TRUE(is_frozen(dirs));
  // A thaw the kernel never reports is a timeout, not success.
  auto thawed = set_frozen(dirs, false, std::chrono::milliseconds{20});
  ASSERT_FALSE(thawed);
  EXPECT_EQ(thawed.error().code, ec::unavailable);
}

TEST_F(fake_v2, a_create_that_cannot_write_its_limits_removes_what_it_made) {
  auto l = layout("cpu memory pids");
  ASSERT_TRUE(l);
  auto made = create_guest_cgroups(*l, "g1", {64u << 20, 64, 1});
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().code, ec::unavailable);
  EXPECT_NE(made.error().message.find("memory.max"), std::string::npos) << made.error().message;
  EXPECT_FALSE(fs::exists(root / "guestflow/g1"));
  EXPECT_TRUE(fs::is_directory(root / "guestflow")); // the parent stays, as on a real host
}
