// The rootfs import policy (controlplane/local/images/image_import.hpp), case by case, on
// archives built byte by byte: what is sanitised, what is refused, what is dropped, and that
// nothing ever lands outside the image.
#include "controlplane/local/images/image_import.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/unit/control_plane_local/tar_writer.hpp"

#include <cstdlib>
#include <fstream>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;
using testing::dir_entry;
using testing::file_entry;
using testing::hardlink_entry;
using testing::make_tar;
using testing::symlink_entry;
using testing::tar_entry;

class image_import : public ::testing::Test {
protected:
  void SetUp() override {
    dest = s.path() / "image";
    fs::create_directory(dest);
    outside = s.path() / "outside";
    fs::create_directory(outside);
  }

  fs::path write(const std::string& name, const std::string& bytes) {
    auto p = s.path() / name;
    std::ofstream{p, std::ios::binary} << bytes;
    return p;
  }

  result<import_report> import_tar(const std::vector<tar_entry>& entries) {
    return import_rootfs(write("in.tar", make_tar(entries)), dest);
  }

  static std::string read(const fs::path& p) {
    std::ifstream in{p, std::ios::binary};
    return {std::istreambuf_iterator<char>(in), {}};
  }

  static uint32_t mode_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  }

  static void expect_refused(const result<import_report>& r, const std::string& needle) {
    ASSERT_FALSE(r) << "expected a refusal mentioning " << needle;
    EXPECT_EQ(r.error().code, ec::bad_request) << r.error().message;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
  }

  test_support::temp_dir s{"guestflow-import"};
  fs::path dest, outside;
};

TEST_F(image_import, absolute_member_paths_land_inside_the_image) {
  auto host_target = outside / "abs-marker";
  auto r = import_tar(
      {file_entry(host_target.string(), "inside"), file_entry("/etc/os-release", "ID=test\n")});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(fs::exists(host_target)) << "an absolute member was written on the host";
  EXPECT_EQ(read(dest / host_target.relative_path()), "inside");
  EXPECT_EQ(read(dest / "etc/os-release"), "ID=test\n");
}

TEST_F(image_import, dot_dot_is_refused_and_writes_nothing_outside) {
  auto rel = fs::path{"a/b/../../../outside/dotdot"}; // dest/.. is s.path()
  expect_refused(import_tar({dir_entry("a/"), file_entry(rel.string(), "x")}), "..");
  EXPECT_FALSE(fs::exists(outside / "dotdot"));
  expect_refused(import_tar({file_entry("../escape", "x")}), "\"../escape\"");
  EXPECT_FALSE(fs::exists(s.path() / "escape"));
}

TEST_F(image_import, nothing_is_written_through_a_symlink) {
  // Absolute and relative links to a host directory, then members "through" them.
  auto r = import_tar({symlink_entry("lnk", outside.string()), file_entry("lnk/pwned", "x")});
  expect_refused(r, "symlink \"lnk\"");
  EXPECT_FALSE(fs::exists(outside / "pwned"));
  fs::remove_all(dest);
  fs::create_directory(dest);
  r = import_tar({symlink_entry("up", "../outside"), dir_entry("up/sub/")});
  expect_refused(r, "symlink \"up\"");
  EXPECT_FALSE(fs::exists(outside / "sub"));
}

TEST_F(image_import, symlinks_are_kept_verbatim_even_when_they_point_outside) {
  auto r = import_tar({symlink_entry("escape", "../../../../etc/shadow"),
                       symlink_entry("etc/localtime", "/usr/share/zoneinfo/UTC"),
                       symlink_entry("bin", "usr/bin")});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(fs::read_symlink(dest / "escape"), "../../../../etc/shadow");
  EXPECT_EQ(fs::read_symlink(dest / "etc/localtime"), "/usr/share/zoneinfo/UTC");
  EXPECT_EQ(fs::read_symlink(dest / "bin"), "usr/bin");
}

TEST_F(image_import, hard_links_only_to_earlier_files_of_the_image) {
  auto r = import_tar({file_entry("usr/bin/a", "same", 0755),
                       hardlink_entry("usr/bin/b", "usr/bin/a"),
                       hardlink_entry("/usr/bin/c", "/usr/bin/a")}); // absolute: sanitised
  ASSERT_TRUE(r) << r.error().message;
  struct stat a {
  }, b{}, c{};
  ASSERT_EQ(::stat((dest / "usr/bin/a").c_str(), &a), 0);
  ASSERT_EQ(::stat((dest / "usr/bin/b").c_str(), &b), 0);
  ASSERT_EQ(::stat((dest / "usr/bin/c").c_str(), &c), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_ino, c.st_ino);
  EXPECT_EQ(r->size_bytes, 4u) << "a linked file counts once";

  auto fresh = [&] {
    fs::remove_all(dest);
    fs::create_directory(dest);
  };
  fresh(); // the host's /etc/shadow is not a member: not linked, refused
  expect_refused(import_tar({hardlink_entry("shadow", "/etc/shadow")}), "hard link");
  fresh();
  expect_refused(import_tar({hardlink_entry("x", "../outside/f")}), "..");
  fresh();
  expect_refused(import_tar({dir_entry("d/"), hardlink_entry("x", "d")}), "hard link");
  fresh();
  expect_refused(import_tar({symlink_entry("s", "/etc/passwd"), hardlink_entry("x", "s")}),
                 "hard link");
  fresh();
  std::ofstream{outside / "f"} << "host";
  expect_refused(import_tar({symlink_entry("o", outside.string()), hardlink_entry("x", "o/f")}),
                 "symlink");
  EXPECT_FALSE(fs::exists(dest / "x"));
}

TEST_F(image_import, device_nodes_and_fifos_are_dropped_and_listed) {
  auto r = import_tar({dir_entry("dev/"),
                       {"dev/sda", '4', {}, {}, 0660},
                       {"dev/null", '3', {}, {}, 0666},
                       {"run/fifo", '6', {}, {}, 0644},
                       file_entry("ok", "1")});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->dropped_total, 3u);
  ASSERT_EQ(r->dropped.size(), 3u);
  EXPECT_EQ(r->dropped[0], "dev/sda (device node)");
  EXPECT_EQ(r->dropped[2], "run/fifo (FIFO)");
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest / "dev/sda")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest / "dev/null")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest / "run/fifo")));
  EXPECT_TRUE(fs::is_regular_file(dest / "ok"));
}

TEST_F(image_import, modes_lose_setuid_setgid_sticky_and_become_readable) {
  auto r = import_tar(
      {file_entry("usr/bin/su", "x", 04755), file_entry("usr/bin/wall", "x", 02755),
       file_entry("etc/shadow", "secret", 0600), file_entry("usr/bin/own", "x", 0700),
       dir_entry("private/", 0700), dir_entry("sticky/", 01777)});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(mode_of(dest / "usr/bin/su"), 0755u);
  EXPECT_EQ(mode_of(dest / "usr/bin/wall"), 0755u);
  EXPECT_EQ(mode_of(dest / "etc/shadow"), 0644u);
  EXPECT_EQ(mode_of(dest / "usr/bin/own"), 0755u);
  EXPECT_EQ(mode_of(dest / "private"), 0755u);
  EXPECT_EQ(mode_of(dest / "sticky"), 0755u);
  EXPECT_EQ(mode_of(dest), 0755u);
}

TEST_F(image_import, the_sandbox_mountpoints_always_exist_and_are_never_links) {
  auto r = import_tar({file_entry("etc/passwd", "root:x:0:0::/root:/bin/sh\n"),
                       symlink_entry("etc/resolv.conf", "/run/systemd/resolve/stub.conf"),
                       symlink_entry("tmp", "/var/tmp"), file_entry("workspace", "oops")});
  ASSERT_TRUE(r) << r.error().message;
  for (auto d : {"proc", "dev", "tmp", "workspace", "etc"})
    EXPECT_TRUE(fs::is_directory(fs::symlink_status(dest / d))) << d;
  for (auto f : {"etc/passwd", "etc/group", "etc/hosts", "etc/resolv.conf"})
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(dest / f))) << f;
  EXPECT_EQ(read(dest / "etc/passwd"), "root:x:0:0::/root:/bin/sh\n") << "the image's own kept";
}

TEST_F(image_import, later_members_replace_files_but_never_directories) {
  auto r = import_tar({file_entry("f", "old"), file_entry("f", "new")});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read(dest / "f"), "new");
  expect_refused(import_tar({dir_entry("d/"), file_entry("d", "x")}), "directory");
}

TEST_F(image_import, long_names_through_pax_headers) {
  std::string deep = "a/" + std::string(120, 'b') + "/file";
  auto r = import_tar(
      {file_entry(deep, "deep"), symlink_entry("link", "/" + std::string(130, 'c'))});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read(dest / deep), "deep");
  EXPECT_EQ(fs::read_symlink(dest / "link").string().size(), 131u);
}

TEST_F(image_import, malformed_archives_are_refused) {
  expect_refused(import_rootfs(write("empty.tar", ""), dest), "empty");
  expect_refused(import_rootfs(write("text.tar", std::string(2048, 'x')), dest), "checksum");
  auto full = make_tar({file_entry("big", std::string(5000, 'z'))});
  expect_refused(import_rootfs(write("cut.tar", full.substr(0, 2048)), dest), "truncated");
  expect_refused(import_tar({{"sparse", 'S', {}, {}, 0644}}), "sparse");
  expect_refused(import_rootfs(s.path() / "missing.tar", dest), "does not exist");
}

bool have_tool(const std::string& tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

TEST_F(image_import, compressed_archives_by_magic_bytes) {
  auto tar = write("c.tar", make_tar({file_entry("hello", "compressed")}));
  int tried = 0;
  for (std::string tool : {"gzip", "xz", "zstd", "bzip2"}) {
    if (!have_tool(tool)) continue;
    ++tried;
    auto out = s.path() / ("c.tar." + tool);
    ASSERT_EQ(std::system((tool + " -c " + tar.string() + " > " + out.string()).c_str()), 0);
    fs::remove_all(dest);
    fs::create_directory(dest);
    auto r = import_rootfs(out, dest);
    ASSERT_TRUE(r) << tool << ": " << r.error().message;
    EXPECT_EQ(read(dest / "hello"), "compressed") << tool;
  }
  EXPECT_GE(tried, 1) << "gzip at least is on every Debian";
  // Corrupt gzip data: the decompressor's own words are in the refusal.
  std::string gz = std::string("\x1f\x8b\x08\x00", 4) + std::string(100, '\x55');
  expect_refused(import_rootfs(write("bad.tar.gz", gz), dest), "gzip");
}

TEST_F(image_import, a_directory_source_follows_the_same_policy) {
  auto src = s.path() / "src";
  fs::create_directories(src / "usr/bin");
  std::ofstream{src / "usr/bin/tool"} << "#!/bin/sh\n";
  ::chmod((src / "usr/bin/tool").c_str(), 04755);
  std::ofstream{src / "secret"} << "s";
  ::chmod((src / "secret").c_str(), 0600);
  fs::create_hard_link(src / "usr/bin/tool", src / "usr/bin/tool2");
  fs::create_symlink("../../etc/shadow", src / "usr/bin/escape");
  ASSERT_EQ(::mkfifo((src / "fifo").c_str(), 0644), 0);
  auto r = import_rootfs(src, dest);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(mode_of(dest / "usr/bin/tool"), 0755u);
  EXPECT_EQ(mode_of(dest / "secret"), 0644u);
  struct stat a {
  }, b{};
  ASSERT_EQ(::stat((dest / "usr/bin/tool").c_str(), &a), 0);
  ASSERT_EQ(::stat((dest / "usr/bin/tool2").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(fs::read_symlink(dest / "usr/bin/escape"), "../../etc/shadow");
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest / "fifo")));
  EXPECT_EQ(r->dropped_total, 1u);
  EXPECT_TRUE(fs::is_directory(dest / "workspace"));

  // A directory holding the destination would be copied into itself.
  auto inner = s.path() / "src" / "state";
  fs::create_directories(inner);
  expect_refused(import_rootfs(s.path() / "src", inner), "state dir");
}

} // namespace
} // namespace guestflow::local
