// Real guests on the local guest backend: every /workspace is a file system of the shape's
// size (workspace_disk.hpp). Writing past it fails inside the guest and the host's disk does
// not grow beyond it; inodes run out too; the files API's room check refuses before writing;
// destroy — also by a second backend after the first died, also from a record that names
// only the id — leaves no mount, loop device or image behind.

#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/guests/workspace_disk.hpp"
#include "tests/integration/guest_backend/test_guest.hpp"
#include "tests/support/slurp.hpp"

#include <fcntl.h>
#include <fstream>
#include <gtest/gtest.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sstream>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::local::test {
namespace {

namespace fs = std::filesystem;

using test_support::slurp;

/// Loop devices bound to a file whose path contains `needle` (`/sys/block/loopN/loop/
/// backing_file` exists only while a device is bound).
std::vector<std::string> loops_backed_by(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec_;
  for (const auto& e : fs::directory_iterator{"/sys/block", ec_}) {
    auto name = e.path().filename().string();
    if (name.rfind("loop", 0) != 0) continue;
    auto backing = slurp(e.path() / "loop" / "backing_file");
    if (backing.find(needle) != std::string::npos) out.push_back(name);
  }
  return out;
}

/// Whether the host's (this process's) mount table mentions `needle`.
bool host_mounts_mention(const std::string& needle) {
  return slurp("/proc/self/mountinfo").find(needle) != std::string::npos;
}

/// Bytes the file really occupies on the host's disk.
uint64_t allocated(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return 0;
  return uint64_t(st.st_blocks) * 512;
}

/// Extents of the file that have blocks on the host's disk (FIEMAP without a sync: data
/// still only in the page cache shows as delayed allocation, not counted); -1 on error.
int extents_on_disk(const fs::path& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  constexpr unsigned max = 256;
  std::vector<char> buf(sizeof(fiemap) + max * sizeof(fiemap_extent));
  auto* fm = reinterpret_cast<fiemap*>(buf.data());
  fm->fm_length = FIEMAP_MAX_OFFSET;
  fm->fm_extent_count = max;
  int rc = ::ioctl(fd, FS_IOC_FIEMAP, fm);
  ::close(fd);
  if (rc != 0) return -1;
  int n = 0;
  for (unsigned i = 0; i < fm->fm_mapped_extents; ++i)
    n += (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_DELALLOC) ? 0 : 1;
  return n;
}

constexpr uint64_t quota_mib = 64;

class workspace_quota_test : public ::testing::Test {
protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "guests need root (cgroups, namespaces)";
    cfg.state_dir = dir.path();
    backend = std::make_unique<guest_backend>(cfg);
  }

  void TearDown() override {
    for (auto& g : made)
      if (backend) backend->destroy(g);
  }

  guest_spec spec(uint64_t inodes = 0) {
    auto s = make_spec(256);
    s.shape_info.default_disk_mib = quota_mib;
    s.workspace_inodes = inodes;
    return s;
  }

  guest_runtime create(const guest_spec& s) {
    auto g = backend->create(s);
    EXPECT_TRUE(g) << (g ? "" : g.error().message);
    if (!g) return {};
    made.push_back(*g);
    return *g;
  }

  /// The guest's mount, loop device and image are all gone, and so is its directory.
  void expect_nothing_left(const guest_runtime& g) {
    const auto image = workspace_image_path(g.workspace);
    EXPECT_TRUE(eventually([&] { return loops_backed_by(image.string()).empty(); }))
        << "a loop device is still bound to " << image;
    EXPECT_FALSE(fs::exists(image));
    EXPECT_FALSE(fs::exists(g.workspace.parent_path()));
    EXPECT_FALSE(host_mounts_mention(g.id));
  }

  temp_dir dir{"guestflow-quota-test"};
  backend_config cfg;
  std::unique_ptr<guest_backend> backend;
  std::vector<guest_runtime> made;
};

TEST_F(workspace_quota_test, the_workspace_is_an_empty_file_system_of_the_shape_size) {
  auto g = create(spec());
  auto r = run(*backend, g,
               {"python3", "-c",
                "import os; s = os.statvfs('/workspace'); st = os.stat('/workspace'); "
                "print(s.f_blocks * s.f_frsize >> 20, st.st_uid, os.listdir('/workspace'), "
                "s.f_files)"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in{r.out};
  uint64_t mib = 0, uid = 0;
  std::string listing;
  in >> mib >> uid >> listing;
  EXPECT_LE(mib, quota_mib);
  EXPECT_GE(mib, quota_mib * 9 / 10) << r.out;
  EXPECT_EQ(uid, cfg.guest_uid) << r.out;
  EXPECT_EQ(listing, "[]") << "no lost+found or anything else: " << r.out;
  // Only the guest's mount namespace holds the file system; one loop device backs it.
  EXPECT_FALSE(host_mounts_mention(g.id));
  EXPECT_EQ(loops_backed_by(workspace_image_path(g.workspace).string()).size(), 1u);
}

TEST_F(workspace_quota_test, writing_past_the_quota_fails_and_the_host_disk_does_not_grow) {
  auto g = create(spec());
  const auto image = workspace_image_path(g.workspace);
  const auto before = allocated(image);
  // Four times the quota, 1 MiB at a time, fsync'd so the host sees every block.
  auto r = run(*backend, g,
               {"python3", "-c",
                "import errno, os\n"
                "written = 0\n"
                "try:\n"
                "    with open('/workspace/big', 'wb') as f:\n"
                "        for _ in range(256):\n"
                "            f.write(b'x' * (1 << 20)); written += 1 << 20\n"
                "        f.flush(); os.fsync(f.fileno())\n"
                "    print('NO-LIMIT', written)\n"
                "except OSError as e:\n"
                "    print(errno.errorcode.get(e.errno), written)\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in{r.out};
  std::string outcome;
  uint64_t written = 0;
  in >> outcome >> written;
  EXPECT_TRUE(outcome == "ENOSPC" || outcome == "EDQUOT") << r.out;
  EXPECT_LE(written, quota_mib << 20) << r.out;
  EXPECT_LE(allocated(image), quota_mib << 20)
      << "the image grew past the quota (before: " << before << ")";
  // The guest can free space again and go on.
  r = run(*backend, g,
          {"sh", "-c",
           "rm /workspace/big && echo ok > /workspace/small && cat "
           "/workspace/small"});
  EXPECT_EQ(r.out, "ok\n") << r.err;
}

TEST_F(workspace_quota_test, inodes_run_out) {
  auto g = create(spec(512));
  auto r = run(*backend, g,
               {"python3", "-c",
                "import errno, os\n"
                "n = 0\n"
                "try:\n"
                "    for n in range(100000):\n"
                "        open('/workspace/f%d' % n, 'w').close()\n"
                "    print('NO-LIMIT', n)\n"
                "except OSError as e:\n"
                "    print(errno.errorcode.get(e.errno), n)\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream in{r.out};
  std::string outcome;
  uint64_t files = 0;
  in >> outcome >> files;
  EXPECT_TRUE(outcome == "ENOSPC" || outcome == "EDQUOT") << r.out;
  EXPECT_LT(files, 1024u) << r.out;
  EXPECT_GT(files, 400u) << r.out;
}

TEST_F(workspace_quota_test, the_room_check_refuses_before_writing) {
  auto g = create(spec());
  auto refused = backend->check_room(g, "/workspace/sub/too-big", (quota_mib + 1) << 20);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ec::artifact_too_large);
  EXPECT_NE(refused.error().message.find("quota"), std::string::npos)
      << refused.error().message;
  EXPECT_TRUE(backend->check_room(g, "/workspace/fits", 1 << 20));
  auto r = run(*backend, g, {"ls", "-A", "/workspace"});
  EXPECT_EQ(r.out, "") << "the check created something";
  // Replacing a file counts the space it frees.
  r = run(*backend, g,
          {"sh", "-c",
           "head -c 40000000 /dev/zero > /workspace/a && head -c 15000000 "
           "/dev/zero > /workspace/b && sync"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(backend->check_room(g, "/workspace/c", 40000000));
  EXPECT_TRUE(backend->check_room(g, "/workspace/a", 40000000));
  // The kernel, not the check, is the limit: a write as host root (the files API's) past
  // the quota fails too.
  auto fd = backend->open_file(g, "/workspace/c", true);
  ASSERT_TRUE(fd) << fd.error().message;
  std::string mib(1 << 20, 'x');
  int err = 0;
  for (int i = 0; i < int(quota_mib) && err == 0; ++i)
    if (::write(*fd, mib.data(), mib.size()) < 0) err = errno;
  ::close(*fd);
  EXPECT_TRUE(err == ENOSPC || err == EDQUOT) << err;
}

TEST_F(workspace_quota_test, destroy_leaves_no_mount_loop_device_or_image) {
  auto g = create(spec());
  ASSERT_EQ(run(*backend, g, {"sh", "-c", "echo hi > /workspace/x"}).exit_code, 0);
  ASSERT_TRUE(fs::exists(workspace_image_path(g.workspace)));
  ASSERT_TRUE(backend->destroy(g));
  expect_nothing_left(g);
  EXPECT_TRUE(backend->destroy(g)) << "idempotent";
}

TEST_F(workspace_quota_test, a_new_backend_cleans_up_after_a_dead_one) {
  // The first backend's process dies without deleting anything (as a control plane killed
  // with -9): one guest fully recorded, one whose record names only its id (persisted
  // before its create returned). A second backend on the same state dir — the reconciler's
  // or `guestflow reap`'s — destroys both.
  const auto full = spec(), id_only = spec();
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t creator = ::fork();
  ASSERT_GE(creator, 0);
  if (creator == 0) {
    ::close(p[0]);
    guest_backend b{cfg};
    auto a = b.create(full);
    auto c = b.create(id_only);
    std::string s;
    if (a && c) {
      s = std::to_string(a->init_pid) + " " + std::to_string(a->init_start_time) + " " +
          a->workspace.string();
      for (const auto& d : a->cgroup_dirs)
        s += " " + d;
    }
    [[maybe_unused]] auto n = ::write(p[1], s.data(), s.size());
    ::_exit(a && c ? 0 : 1);
  }
  ::close(p[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0)
    text.append(buf, size_t(n));
  ::close(p[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(creator, &status, 0), creator);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << text;

  guest_runtime a;
  a.id = full.id;
  std::istringstream in{text};
  std::string ws, d;
  in >> a.init_pid >> a.init_start_time >> ws;
  a.workspace = ws;
  while (in >> d)
    a.cgroup_dirs.push_back(d);
  guest_runtime c;
  c.id = id_only.id;
  made = {a, c}; // whatever happens below, TearDown destroys them
  const auto c_image = dir.path() / "guests" / c.id / "workspace.ext4";
  ASSERT_TRUE(fs::exists(c_image));
  ASSERT_EQ(loops_backed_by(c_image.string()).size(), 1u) << "the guest keeps running";

  guest_backend second{cfg};
  ASSERT_TRUE(second.destroy(a));
  ASSERT_TRUE(second.destroy(c));
  expect_nothing_left(a);
  c.workspace = dir.path() / "guests" / c.id / "workspace";
  expect_nothing_left(c);
}

TEST_F(workspace_quota_test, many_guests_leak_no_loop_device) {
  // Create and destroy in a loop: every device a guest took is free again afterwards.
  const auto state = dir.path().string();
  for (int i = 0; i < 6; ++i) {
    auto g = create(spec());
    ASSERT_TRUE(backend->destroy(g));
  }
  // Only the images the pool keeps ready are bound (below the templates dir), and they go
  // with the backend.
  auto guests = (dir.path() / "guests").string();
  EXPECT_TRUE(eventually([&] { return loops_backed_by(guests).empty(); }))
      << loops_backed_by(guests).size() << " loop devices still bound below " << guests;
  EXPECT_LE(loops_backed_by(state).size(), 2u) << "more than the pool's depth is ready";
  backend.reset();
  EXPECT_TRUE(eventually([&] { return loops_backed_by(state).empty(); }))
      << loops_backed_by(state).size() << " loop devices still bound below " << state;
}

TEST_F(workspace_quota_test, a_create_takes_an_image_the_pool_made_ready) {
  auto first = create(spec()); // the quota's first create mounts its own; the pool fills
  ASSERT_TRUE(eventually(
      [&] { return loops_backed_by((dir.path() / "disk-templates").string()).size() == 2; },
      30s))
      << "the pool never made 2 images ready";
  auto second = create(spec());
  auto image = workspace_image_path(second.workspace).string();
  // The ready image was renamed into place: its loop device now names the guest's image.
  EXPECT_EQ(loops_backed_by(image).size(), 1u);
  // It is the guest's own, empty, and as limited as a workspace mounted on the create's path.
  auto r = run(*backend, second,
               {"python3", "-c",
                "import errno, os\n"
                "print(os.listdir('/workspace'), os.stat('/workspace').st_uid)\n"
                "try:\n"
                "    with open('/workspace/big', 'wb') as f:\n"
                "        for _ in range(128):\n"
                "            f.write(b'x' * (1 << 20))\n"
                "        f.flush(); os.fsync(f.fileno())\n"
                "    print('NO-LIMIT')\n"
                "except OSError as e:\n"
                "    print(errno.errorcode.get(e.errno))\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "[] " + std::to_string(cfg.guest_uid) + "\nENOSPC\n");
  ASSERT_TRUE(backend->destroy(second));
  made.pop_back();
  expect_nothing_left(second);
  ASSERT_TRUE(backend->destroy(first));
  made.pop_back();
  expect_nothing_left(first);
}

TEST_F(workspace_quota_test, a_disposable_workspace_is_never_written_to_the_host_disk) {
  // The first create of a quota makes its image on its path, the second takes one the pool
  // made: neither image has a block on the host's disk after the create (the loop attach's
  // fsync found nothing dirty) nor after a write and the exec's write-back (nobarrier: no
  // fsync of the image), so its unlink discards nothing. Its file system is whole.
  auto first = create(spec());
  ASSERT_TRUE(eventually(
      [&] { return loops_backed_by((dir.path() / "disk-templates").string()).size() == 2; },
      30s))
      << "the pool never made 2 images ready";
  auto second = create(spec());
  for (const auto* g : {&first, &second}) {
    const auto image = workspace_image_path(g->workspace);
    EXPECT_EQ(extents_on_disk(image), 0) << image << " was written to the host's disk";
    auto r = run(*backend, *g,
                 {"python3", "-c",
                  "import os\n"
                  "with open('/workspace/f', 'wb') as f:\n"
                  "    f.write(b'x' * 100000); f.flush(); os.fsync(f.fileno())\n"
                  "print(os.listdir('/workspace'), os.path.getsize('/workspace/f'))\n"
                  "print(any('nobarrier' in l for l in open('/proc/self/mountinfo')\n"
                  "          if ' /workspace ' in l))\n"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "['f'] 100000\nTrue\n");
    ASSERT_TRUE(backend->sync_workspace(*g));
    EXPECT_EQ(extents_on_disk(image), 0) << image << " was written to the host's disk";
  }
}

TEST_F(workspace_quota_test, a_persistent_workspace_keeps_its_data_on_the_host_disk) {
  // A persistent guest's image is reserved (every block allocated) and mounted with
  // barriers: what the guest fsyncs is on the host's disk, not only in a page cache.
  auto s = spec();
  s.reserve_workspace = true;
  auto g = create(s);
  const auto image = workspace_image_path(g.workspace);
  EXPECT_GT(extents_on_disk(image), 0);
  EXPECT_GE(allocated(image), quota_mib << 20);
  auto r = run(*backend, g,
               {"python3", "-c",
                "import os\n"
                "with open('/workspace/f', 'wb') as f:\n"
                "    f.write(b'x' * 100000); f.flush(); os.fsync(f.fileno())\n"
                "print(os.path.getsize('/workspace/f'))\n"
                "print([l for l in open('/proc/self/mountinfo') if ' /workspace ' in l])\n"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("100000\n", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("ext4"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("nobarrier"), std::string::npos) << r.out;
}

TEST_F(workspace_quota_test, a_dead_servers_ready_images_are_removed_at_start) {
  // A ready image of a server that died (its name ends with the dead pid): its mount died
  // with it, and the next backend on the state dir removes the file; so is a template an
  // earlier format made.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const auto templates = dir.path() / "disk-templates";
  fs::create_directories(templates);
  const auto left =
      templates / (".staging-ready-ext4r-64m-4096i-0-0-7-" + std::to_string(dead));
  std::ofstream{left} << "x";
  const auto ours =
      templates / (".staging-ready-ext4r-64m-4096i-0-0-8-" + std::to_string(::getpid()));
  std::ofstream{ours} << "x";
  const auto old_format = templates / "ext4-64m-4096i-0-0.img"; // with a resize inode
  std::ofstream{old_format} << "x";
  backend.reset();
  backend = std::make_unique<guest_backend>(cfg);
  EXPECT_FALSE(fs::exists(left)) << "a dead server's ready image stayed";
  EXPECT_FALSE(fs::exists(old_format)) << "an earlier format's template stayed";
  EXPECT_TRUE(fs::exists(ours)) << "a live server's ready image is not the start's to remove";
  fs::remove(ours);
}

} // namespace
} // namespace guestflow::local::test
