// The host side of a session's thread-directory sync (actors/session_task.hpp) and the
// control plane's check of a create's mounts (controlplane/local/guests/guest_mounts.hpp):
// real directories in a temporary one, no guest.

#include "actors/session_task.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/local/guests/guest_mounts.hpp"
#include "tests/support/temp_dir.hpp"

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <unistd.h>

namespace guestflow {
namespace {

namespace fs = std::filesystem;

class host_dir : public ::testing::Test {
protected:
  test_support::temp_dir dir{"gf-sync"};
  fs::path root = fs::canonical(dir.path());
  void put(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream{p, std::ios::binary} << bytes;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in{p, std::ios::binary};
    return {std::istreambuf_iterator<char>(in), {}};
  }
};

TEST_F(host_dir, UploadsAreRegularFilesBelowNeverThroughALink) {
  auto up = root / "uploads";
  put(up / "a.txt", "A");
  put(up / "sub dir" / "b\nc", "BC");
  put(up / ".upload-123", "partial"); // DeerFlow's own partial upload
  put(root / "secret", "S");
  fs::create_symlink(root / "secret", up / "link");   // a file link: skipped
  fs::create_directory_symlink(root, up / "dirlink"); // a directory link: not entered
  auto files = host_files_below(up.string(), 10, 1000);
  ASSERT_TRUE(files) << files.error().message;
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].rel, "a.txt");
  EXPECT_EQ((*files)[1].rel, "sub dir/b\nc");
  EXPECT_EQ((*files)[1].size, 2u);
  auto bytes = read_host_file(up.string(), "sub dir/b\nc");
  ASSERT_TRUE(bytes);
  EXPECT_EQ(*bytes, "BC");
  EXPECT_FALSE(read_host_file(up.string(), "link"));
  EXPECT_FALSE(read_host_file(up.string(), "dirlink/secret"));
  EXPECT_FALSE(read_host_file(up.string(), "../secret"));
  // A missing uploads directory has nothing to copy.
  auto none = host_files_below((root / "missing").string(), 10, 1000);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

TEST_F(host_dir, UploadsPastEitherCapAreRefusedWhole) {
  auto up = root / "uploads";
  put(up / "a", "12345");
  put(up / "b", "12345");
  auto many = host_files_below(up.string(), 1, 1000);
  ASSERT_FALSE(many);
  EXPECT_EQ(many.error().code, ec::artifact_too_large);
  auto big = host_files_below(up.string(), 10, 9);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, ec::artifact_too_large);
  EXPECT_TRUE(host_files_below(up.string(), 2, 10));
}

TEST_F(host_dir, OutputsAreWrittenByteExactAndNeverThroughALink) {
  ASSERT_TRUE(write_host_file(root.string(), "outputs/r\xff port.md", "x"));
  EXPECT_EQ(read(root / "outputs" / "r\xff port.md"), "x");
  ASSERT_TRUE(write_host_file(root.string(), "outputs/deep/er/f", "y"));
  EXPECT_EQ(read(root / "outputs" / "deep" / "er" / "f"), "y");
  // A directory link is never followed out of the thread dir.
  fs::create_directory(root / "elsewhere");
  fs::create_directory_symlink(root / "elsewhere", root / "outputs" / "esc");
  auto r = write_host_file(root.string(), "outputs/esc/f", "z");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::policy_refused);
  EXPECT_FALSE(fs::exists(root / "elsewhere" / "f"));
  // A file link at the name is replaced, its target untouched.
  put(root / "target", "T");
  fs::create_symlink(root / "target", root / "outputs" / "l");
  ASSERT_TRUE(write_host_file(root.string(), "outputs/l", "new"));
  EXPECT_EQ(read(root / "target"), "T");
  EXPECT_FALSE(fs::is_symlink(root / "outputs" / "l"));
  EXPECT_EQ(read(root / "outputs" / "l"), "new");
  for (auto bad : {"outputs/../x", "outputs//x", "outputs/./x", ""})
    EXPECT_EQ(write_host_file(root.string(), bad, "n").error().code, ec::bad_request) << bad;
  // Nothing was left under a temporary name.
  for (auto& e : fs::recursive_directory_iterator(root))
    EXPECT_EQ(e.path().filename().string().rfind(".gf-sync-", 0), std::string::npos);
}

TEST_F(host_dir, MountsOnlyUnderTheRootsAndNeverOverTheGuestsOwnPaths) {
  fs::create_directories(root / "allowed" / "data");
  fs::create_directories(root / "other");
  fs::create_directory_symlink(root / "other", root / "allowed" / "escape");
  std::vector<fs::path> roots{root / "allowed"};
  auto host = [](std::string h, std::string g) { return sandbox_mount{h, "", g, true}; };
  auto ok =
      local::resolve_mounts({host((root / "allowed" / "data").string(), "/mnt/data"),
                             sandbox_mount{"", ".deerflow/user-data", "/mnt/user-data", false}},
                            roots);
  ASSERT_TRUE(ok) << ok.error().message;
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].guest_path, "/mnt/data"); // sorted by guest path
  // A symlink out of the root is judged by its real path.
  auto esc =
      local::resolve_mounts({host((root / "allowed" / "escape").string(), "/mnt/e")}, roots);
  ASSERT_FALSE(esc);
  EXPECT_NE(esc.error().message.find((root / "allowed").string()), std::string::npos)
      << esc.error().message;
  EXPECT_FALSE(local::resolve_mounts({host((root / "other").string(), "/mnt/o")}, roots));
  EXPECT_FALSE(
      local::resolve_mounts({host((root / "allowed" / "data").string(), "/mnt/o")}, {}));
  for (auto g : {"/", "/etc", "/etc/x", "/workspace/a", "/proc", "/usr/local", "/mnt/../etc",
                 "/mnt//a", "/mnt/a/", "mnt"})
    EXPECT_FALSE(local::resolve_mounts({host((root / "allowed").string(), g)}, roots)) << g;
  EXPECT_FALSE(local::resolve_mounts({host((root / "allowed").string(), "/mnt/a"),
                                      host((root / "allowed").string(), "/mnt/a/b")},
                                     roots));
  for (auto w : {"/abs", "../up", "a/../b", "a//b"})
    EXPECT_FALSE(local::resolve_mounts({sandbox_mount{"", w, "/mnt/w", false}}, roots)) << w;
}

TEST_F(host_dir, MountsRoundTripThroughTheRecordStoresText) {
  std::vector<sandbox_mount> xs{{"/srv/a b", "", "/mnt/a", true},
                                {"", ".deerflow/user-data", "/mnt/user-data", false}};
  auto back = local::mounts_from_text(local::mounts_to_text(xs));
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, xs);
  EXPECT_FALSE(local::mounts_from_text("zz\tx\t/y\n"));
}

TEST_F(host_dir, WorkspaceDirectoriesAreMadeButNeverThroughALink) {
  unique_fd rootfd{::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  ASSERT_TRUE(local::make_workspace_dirs(
      rootfd.get(), {sandbox_mount{"", "a/b", "/mnt/ab", false}}, ::getuid(), ::getgid()));
  EXPECT_TRUE(fs::is_directory(root / "a" / "b"));
  fs::create_directory_symlink("/etc", root / "link");
  auto r = local::make_workspace_dirs(
      rootfd.get(), {sandbox_mount{"", "link/x", "/mnt/x", false}}, ::getuid(), ::getgid());
  ASSERT_FALSE(r);
  EXPECT_FALSE(fs::exists("/etc/x"));
}

} // namespace
} // namespace guestflow
