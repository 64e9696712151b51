#include "controlplane/local/guests/workspace_disk.hpp"

#include "common/numbers.hpp"
#include "controlplane/local/guests/host_command.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <map>
#include <optional>
#include <stdio.h> // renameat2
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace guestflow::local {
namespace {

namespace fs = std::filesystem;

constexpr const char* staging_prefix = ".staging-";

failure os_failure(const std::string& what, int err = errno) {
  return fail(ec::unavailable, what + ": " + std::strerror(err));
}

/// Templates are named by this prefix and their shape; one made by an earlier format (no
/// `r`: with a resize inode) is removed at start (remove_old_templates).
constexpr const char* template_prefix = "ext4r-";

std::string template_name(const workspace_quota& q, uid_t uid, gid_t gid) {
  return template_prefix + std::to_string(q.mib) + "m-" + std::to_string(q.inodes) + "i-" +
         std::to_string(uid) + "-" + std::to_string(gid) + ".img";
}

/// The data extents of the file `fd`, [start, end) each, its holes left out (SEEK_DATA and
/// SEEK_HOLE).
result<std::vector<std::pair<off_t, off_t>>> data_extents(int fd) {
  std::vector<std::pair<off_t, off_t>> out;
  for (off_t at = 0;;) {
    off_t data = ::lseek(fd, at, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) return out; // no data after `at`
      return os_failure("reading the workspace template's extents");
    }
    off_t hole = ::lseek(fd, data, SEEK_HOLE);
    if (hole < 0) return os_failure("reading the workspace template's extents");
    out.emplace_back(data, hole);
    at = hole;
  }
}

/// Copies `src` to the new file `dst` keeping its holes: a reflink when the host file
/// system can, else only the data extents (SEEK_DATA / SEEK_HOLE, copy_file_range).
result<bool> sparse_copy(const fs::path& src, const fs::path& dst) {
  unique_fd in{::open(src.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!in) return os_failure("opening the workspace template " + src.string());
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return os_failure("stat " + src.string());
  unique_fd out{::open(dst.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (!out) return os_failure("creating the workspace image " + dst.string());
  auto failed = [&](const std::string& what) {
    auto f = os_failure(what);
    ::unlink(dst.c_str());
    return f;
  };
  if (::ioctl(out.get(), FICLONE, in.get()) == 0) return true;
  auto extents = data_extents(in.get());
  if (!extents) {
    ::unlink(dst.c_str());
    return extents.error();
  }
  for (auto [data, hole] : *extents) {
    loff_t from = data, to = data;
    while (from < hole) {
      auto n = ::copy_file_range(in.get(), &from, out.get(), &to, size_t(hole - from), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return failed("copying the workspace template");
    }
  }
  if (::ftruncate(out.get(), st.st_size) != 0) return failed("sizing the workspace image");
  return true;
}

/// Binds `backing` to a free loop device that clears itself when its last user (the
/// mount) is gone. Returns the device's path and an open descriptor on it (the caller
/// keeps it until the file system holds the device).
result<std::pair<std::string, unique_fd>> attach_loop(int backing, const std::string& name) {
  unique_fd ctl{::open("/dev/loop-control", O_RDWR | O_CLOEXEC)};
  if (!ctl) return os_failure("opening /dev/loop-control (workspace quotas need loop devices)");
  loop_config cfg{};
  cfg.fd = uint32_t(backing);
  cfg.block_size = 4096; // the image's block size
  // Buffered, not LO_FLAGS_DIRECT_IO: switching a device to direct I/O freezes its queue
  // (an RCU grace period: up to tens of ms on a busy host) on every create. The backing
  // file's page cache is charged to the writing guest's memory cgroup all the same.
  cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
  std::strncpy(reinterpret_cast<char*>(cfg.info.lo_file_name), name.c_str(), LO_NAME_SIZE - 1);
  for (int attempt = 0; attempt < 64; ++attempt) {
    int n = ::ioctl(ctl.get(), LOOP_CTL_GET_FREE);
    if (n < 0) return os_failure("finding a free loop device");
    auto dev = "/dev/loop" + std::to_string(n);
    unique_fd loop{::open(dev.c_str(), O_RDWR | O_CLOEXEC)};
    if (!loop) {
      if (errno == ENOENT || errno == ENXIO) continue; // removed meanwhile
      return os_failure("opening " + dev);
    }
    if (::ioctl(loop.get(), LOOP_CONFIGURE, &cfg) == 0)
      return std::pair{std::move(dev), std::move(loop)};
    if (errno != EBUSY) return os_failure("binding " + dev + " to " + name);
    // Another process took this device between GET_FREE and CONFIGURE: the next one.
  }
  return fail(ec::unavailable, "no free loop device after 64 attempts");
}

/// What the file system context said about a failed mount (fsopen's message log).
std::string context_log(int fs_fd) {
  std::string out;
  char buf[512];
  for (int i = 0; i < 8; ++i) {
    auto n = ::read(fs_fd, buf, sizeof buf);
    if (n <= 0) break;
    out += (out.empty() ? "" : "; ") + std::string{buf, size_t(n)};
  }
  return out;
}

/// Removes staging files a dead process left (a crash mid-build).
void remove_dead_staging(const fs::path& dir) {
  std::error_code ec_;
  for (const auto& e : fs::directory_iterator{dir, ec_}) {
    auto name = e.path().filename().string();
    if (name.rfind(staging_prefix, 0) != 0) continue;
    auto pid_at = name.rfind('-');
    pid_t pid = pid_at == std::string::npos ? 0 : pid_t(std::atol(name.c_str() + pid_at + 1));
    if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) fs::remove(e.path(), ec_);
  }
}

/// Removes templates an earlier format made (`ext4-…`: 4.5x the metadata, see template_for).
void remove_old_templates(const fs::path& dir) {
  std::error_code ec_;
  for (const auto& e : fs::directory_iterator{dir, ec_}) {
    auto name = e.path().filename().string();
    if (name.rfind("ext4-", 0) == 0 && e.path().extension() == ".img")
      fs::remove(e.path(), ec_);
  }
}

/// Pool mounts handed over by create_image, waiting for the backend's mount_detached (or a
/// remove_image), by the image file's inode: a path would not survive the rename.
struct handover_table {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, unique_fd> mounts;
};

handover_table& handovers() {
  static handover_table t;
  return t;
}

std::optional<std::pair<dev_t, ino_t>> inode_of(const fs::path& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

unique_fd take_handover(std::pair<dev_t, ino_t> key) {
  auto& t = handovers();
  std::lock_guard<std::mutex> lock{t.mu};
  auto i = t.mounts.find(key);
  if (i == t.mounts.end()) return {};
  auto fd = std::move(i->second);
  t.mounts.erase(i);
  return fd;
}

/// The file system on the attached loop device `loop` as a detached mount; `durable`:
/// mount_detached's.
result<unique_fd> mount_loop(std::pair<std::string, unique_fd> loop, bool durable) {
  unique_fd ctx{::fsopen("ext4", FSOPEN_CLOEXEC)};
  if (!ctx) return os_failure("fsopen(ext4)");
  auto step = [&](const char* what, int rc) -> std::optional<failure> {
    if (rc == 0) return std::nullopt;
    int err = errno;
    auto log = context_log(ctx.get());
    return fail(ec::unavailable, std::string{"mounting the workspace image: "} + what + ": " +
                                     std::strerror(err) +
                                     (log.empty() ? "" : " (" + log + ")"));
  };
  if (auto f = step("source", ::fsconfig(ctx.get(), FSCONFIG_SET_STRING, "source",
                                         loop.first.c_str(), 0)))
    return *f;
  // The inode tables stay unzeroed (lazy init would write them all: the image would stop
  // being sparse); ext4 knows which are in use from the group descriptors.
  if (auto f = step("noinit_itable",
                    ::fsconfig(ctx.get(), FSCONFIG_SET_FLAG, "noinit_itable", nullptr, 0)))
    return *f;
  // A disposable workspace's syncfs (after each exec, at the unmount) then writes the guest's
  // pages through the loop device into the image's page cache and reports their errors, but
  // sends no flush: the loop device would answer a flush with an fsync of the image on the
  // host, writing back and allocating on the host disk blocks that the image's unlink
  // discards a second later (the host's file system is mounted with `discard`).
  if (!durable)
    if (auto f = step("nobarrier",
                      ::fsconfig(ctx.get(), FSCONFIG_SET_FLAG, "nobarrier", nullptr, 0)))
      return *f;
  if (auto f = step("create", ::fsconfig(ctx.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0)))
    return *f;
  unique_fd mnt{::fsmount(ctx.get(), FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME)};
  if (!mnt) return os_failure("fsmount of the workspace image");
  return mnt; // the loop descriptor closes here: the file system holds the device now
}

/// The file system on `backing` (the image at `image`) as a detached mount; `durable`:
/// mount_detached's.
result<unique_fd> mount_backing(int backing, const fs::path& image, bool durable) {
  auto loop = attach_loop(backing, image.string());
  if (!loop) return loop.error();
  return mount_loop(std::move(*loop), durable);
}

/// The template's size and data extents (its holes left out), read into memory: every fresh
/// image is written from them, without opening, seeking and reading the template again.
result<workspace_template_blocks> read_template_blocks(const fs::path& tpl) {
  unique_fd in{::open(tpl.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!in) return os_failure("opening the workspace template " + tpl.string());
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return os_failure("stat " + tpl.string());
  workspace_template_blocks out;
  out.size = st.st_size;
  out.dev = st.st_dev;
  out.ino = st.st_ino;
  auto extents = data_extents(in.get());
  if (!extents) return extents.error();
  for (auto [data, hole] : *extents) {
    std::string bytes(size_t(hole - data), '\0');
    for (size_t got = 0; got < bytes.size();) {
      auto n = ::pread(in.get(), bytes.data() + got, bytes.size() - got, data + off_t(got));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return os_failure("reading the workspace template");
      got += size_t(n);
    }
    out.extents.emplace_back(data, std::move(bytes));
  }
  return out;
}

/// A new disposable image at `file` (which must not exist) holding the template `tpl`'s
/// file system, as a detached mount that is not durable. The file is made sparse and empty
/// and attached first, and the template's blocks are written through the loop device: the
/// kernel's loop attach fsyncs its backing file, which for an image copied ahead would write
/// the template's blocks to the host's disk (and the image's unlink would then discard
/// them: the host's file system is mounted with `discard`); written through the device,
/// they stay in the page cache until the guest's syncfs, and then in the image's page cache.
/// On failure nothing is left at `file`.
result<unique_fd> mount_fresh(const workspace_template_blocks& tpl, const fs::path& file) {
  unique_fd out{::open(file.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
  if (!out) return os_failure("creating the workspace image " + file.string());
  auto failed = [&](failure f) {
    ::unlink(file.c_str());
    return f;
  };
  if (::ftruncate(out.get(), tpl.size) != 0)
    return failed(os_failure("sizing the workspace image"));
  auto loop = attach_loop(out.get(), file.string());
  if (!loop) return failed(loop.error());
  for (auto& [at, bytes] : tpl.extents)
    for (size_t done = 0; done < bytes.size();) {
      auto w = ::pwrite(loop->second.get(), bytes.data() + done, bytes.size() - done,
                        at + off_t(done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return failed(os_failure("writing the workspace image " + loop->first));
      done += size_t(w);
    }
  auto mnt = mount_loop(std::move(*loop), false);
  if (!mnt) return failed(mnt.error());
  return mnt;
}

/// Images the pool keeps ready for at most this many quotas (the least recently used goes).
constexpr size_t max_pools = 4;

} // namespace

fs::path workspace_image_path(const fs::path& ws) {
  auto p = ws;
  p += ".ext4";
  return p;
}

result<size_t> workspace_pool_from(const char* value) {
  if (value == nullptr || *value == '\0') return size_t{2};
  auto n = parse_uint_as<size_t>(value, 0, max_workspace_pool);
  if (!n)
    return fail(ec::bad_request,
                uint_refusal("GUESTFLOW_WORKSPACE_POOL", value, 0, max_workspace_pool));
  return *n;
}

workspace_disks::workspace_disks(fs::path templates_dir, std::string mke2fs, size_t pool_depth)
    : dir_(std::move(templates_dir))
    , mke2fs_(std::move(mke2fs))
    , depth_(std::min(pool_depth, max_workspace_pool)) {
  // A dead server's ready images (their mounts died with it): the templates dir is
  // otherwise only swept when a new template is built.
  remove_dead_staging(dir_);
  remove_old_templates(dir_);
}

workspace_disks::~workspace_disks() {
  {
    std::lock_guard<std::mutex> lock{pool_mu_};
    stopping_ = true;
  }
  pool_cv_.notify_all();
  if (filler_.joinable()) filler_.join();
  for (auto& [key, p] : pools_)
    for (auto& r : p.ready) {
      r.mount.reset(); // unmounts; the loop device detaches itself
      ::unlink(r.file.c_str());
    }
}

void workspace_disks::set_pool_depth(size_t depth) {
  std::vector<ready_image> extra;
  {
    std::lock_guard<std::mutex> lock{pool_mu_};
    depth_ = depth;
    for (auto& [key, p] : pools_)
      while (p.ready.size() > depth_) {
        extra.push_back(std::move(p.ready.back()));
        p.ready.pop_back();
      }
  }
  pool_cv_.notify_all();
  for (auto& r : extra) {
    r.mount.reset();
    ::unlink(r.file.c_str());
  }
}

size_t workspace_disks::pool_ready() {
  std::lock_guard<std::mutex> lock{pool_mu_};
  size_t n = 0;
  for (auto& [key, p] : pools_)
    n += p.ready.size();
  return n;
}

bool workspace_disks::wait_pool_full(std::chrono::milliseconds deadline) {
  std::unique_lock<std::mutex> lock{pool_mu_};
  auto full = [this] {
    for (auto& [key, p] : pools_)
      if (p.ready.size() < depth_) return false;
    return true;
  };
  pool_cv_.wait_for(lock, deadline, [&] { return full() || fill_failed_; });
  return full();
}

std::optional<workspace_disks::ready_image> workspace_disks::take(const workspace_quota& q,
                                                                  uid_t uid, gid_t gid) {
  std::vector<ready_image> evicted;
  std::optional<ready_image> out;
  {
    std::lock_guard<std::mutex> lock{pool_mu_};
    if (depth_ == 0) return std::nullopt;
    auto key = template_name(q, uid, gid);
    auto [i, fresh] = pools_.try_emplace(key);
    if (fresh) {
      i->second.quota = q;
      i->second.uid = uid;
      i->second.gid = gid;
      if (pools_.size() > max_pools) {
        auto oldest = pools_.end();
        for (auto j = pools_.begin(); j != pools_.end(); ++j)
          if (j != i &&
              (oldest == pools_.end() || j->second.last_used < oldest->second.last_used))
            oldest = j;
        for (auto& r : oldest->second.ready)
          evicted.push_back(std::move(r));
        pools_.erase(oldest);
      }
    }
    i->second.last_used = ++uses_;
    if (!i->second.ready.empty()) {
      out = std::move(i->second.ready.front());
      i->second.ready.pop_front();
    }
    if (!filler_.joinable()) filler_ = std::thread{[this] { fill(); }};
  }
  pool_cv_.notify_all();
  for (auto& r : evicted) {
    r.mount.reset();
    ::unlink(r.file.c_str());
  }
  return out;
}

void workspace_disks::fill() {
  static std::atomic<unsigned> seq{0};
  std::unique_lock<std::mutex> lock{pool_mu_};
  while (!stopping_) {
    std::string key;
    for (auto& [k, p] : pools_)
      if (p.ready.size() < depth_) {
        key = k;
        break;
      }
    if (key.empty()) {
      pool_cv_.wait(lock);
      continue;
    }
    auto p = pools_.at(key).quota;
    auto uid = pools_.at(key).uid, gid = pools_.at(key).gid;
    lock.unlock();
    std::optional<ready_image> made;
    std::string error;
    auto tpl = blocks_for(p, uid, gid);
    const auto file = dir_ / (std::string{staging_prefix} + "ready-" + key + "-" +
                              std::to_string(seq++) + "-" + std::to_string(::getpid()));
    if (!tpl) {
      error = tpl.error().message;
    } else if (auto mnt = mount_fresh(**tpl, file); !mnt) {
      error = mnt.error().message;
    } else {
      made = ready_image{file, std::move(*mnt)};
    }
    lock.lock();
    fill_failed_ = !made;
    if (!made) { // creates mount their own meanwhile; the filler tries again later
      pool_cv_.notify_all();
      pool_cv_.wait_for(lock, std::chrono::seconds{5}, [this] { return stopping_; });
      continue;
    }
    auto i = pools_.find(key);
    if (stopping_ || i == pools_.end() || i->second.ready.size() >= depth_) {
      lock.unlock(); // the quota was evicted or the depth lowered meanwhile
      made->mount.reset();
      ::unlink(made->file.c_str());
      lock.lock();
      continue;
    }
    i->second.ready.push_back(std::move(*made));
    pool_cv_.notify_all();
  }
}

result<fs::path> workspace_disks::template_for(const workspace_quota& q, uid_t uid, gid_t gid) {
  const auto path = dir_ / template_name(q, uid, gid);
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return path;
  std::lock_guard<std::mutex> lock{mu_};
  if (::stat(path.c_str(), &st) == 0) return path; // built while we waited
  std::error_code ec_;
  fs::create_directories(dir_, ec_);
  if (ec_)
    return fail(ec::unavailable, "cannot create " + dir_.string() + ": " + ec_.message());
  ::chmod(dir_.c_str(), 0700);
  remove_dead_staging(dir_);
  static std::atomic<unsigned> seq{0};
  const auto staging = dir_ / (staging_prefix + template_name(q, uid, gid) + "-" +
                               std::to_string(seq++) + "-" + std::to_string(::getpid()));
  auto give_up = [&](failure f) {
    ::unlink(staging.c_str());
    return f;
  };
  {
    unique_fd f{::open(staging.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)};
    if (!f || ::ftruncate(f.get(), off_t(q.mib << 20)) != 0)
      return give_up(os_failure("creating " + staging.string()));
  }
  // No journal: a workspace is scratch space a crash may lose (and a journal would add a
  // kernel thread per guest). Lazy inode tables (never zeroed: mounts use noinit_itable) keep
  // the image sparse; -m 0 leaves no blocks only root could use. No resize inode: a
  // workspace is never grown, and its reserved descriptor blocks were 127 of the 164 blocks
  // every guest's image is written (a 1 GiB template: 656 KiB -> 144 KiB).
  auto out = run_command({mke2fs_, "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-N",
                          std::to_string(q.inodes), "-O", "^has_journal,^resize_inode", "-E",
                          "lazy_itable_init=1,nodiscard,root_owner=" + std::to_string(uid) +
                              ":" + std::to_string(gid),
                          "-L", "workspace", staging.string()});
  if (!out) return give_up(out.error());
  if (out->exit_code != 0)
    return give_up(fail(ec::unavailable, "formatting a workspace template with " + mke2fs_ +
                                             " failed (exit " + std::to_string(out->exit_code) +
                                             "): " + out->output));
  {
    // An empty workspace: no lost+found (e2fsck makes one again if it ever needs it).
    auto mnt = mount_detached(staging);
    if (!mnt) return give_up(mnt.error());
    if (::unlinkat(mnt->get(), "lost+found", AT_REMOVEDIR) != 0 && errno != ENOENT)
      return give_up(os_failure("preparing the workspace template"));
  } // closing the detached mount unmounts it (and syncs) before this returns
  if (::rename(staging.c_str(), path.c_str()) != 0)
    return give_up(os_failure("installing the workspace template " + path.string()));
  return path;
}

result<std::shared_ptr<const workspace_template_blocks>>
workspace_disks::blocks_for(const workspace_quota& q, uid_t uid, gid_t gid) {
  auto tpl = template_for(q, uid, gid);
  if (!tpl) return tpl.error();
  auto key = tpl->filename().string();
  struct stat st {};
  if (::stat(tpl->c_str(), &st) != 0) return os_failure("stat " + tpl->string());
  {
    std::lock_guard<std::mutex> lock{blocks_mu_};
    auto i = blocks_.find(key);
    if (i != blocks_.end() && i->second->dev == st.st_dev && i->second->ino == st.st_ino)
      return i->second;
  }
  auto read = read_template_blocks(*tpl);
  if (!read) return read.error();
  auto blocks = std::make_shared<const workspace_template_blocks>(std::move(*read));
  std::lock_guard<std::mutex> lock{blocks_mu_};
  if (blocks_.size() >= 2 * max_pools && !blocks_.count(key)) blocks_.erase(blocks_.begin());
  blocks_[key] = blocks;
  return blocks;
}

result<bool> workspace_disks::create_image(const fs::path& image, const workspace_quota& q,
                                           uid_t uid, gid_t gid, bool reserve) {
  if (q.mib == 0 || q.inodes == 0)
    return fail(ec::bad_request, "a workspace needs a size and an inode count");
  if (auto ok = check_disk_floor(image.parent_path()); !ok) return ok;
  auto made = copy_image(image, q, uid, gid, !reserve);
  if (!made || !reserve) return made;
  // Every block allocated now (unwritten extents: no data written, ~ms for a GiB): the
  // guest's writes can then never meet a full host file system.
  unique_fd f{::open(image.c_str(), O_RDWR | O_CLOEXEC)};
  if (f && ::fallocate(f.get(), 0, 0, off_t(q.mib << 20)) == 0) return true;
  int err = errno;
  remove_image(image);
  if (err == ENOSPC || err == EDQUOT)
    return fail(ec::capacity, "insufficient storage: the host cannot reserve this persistent "
                              "sandbox's " +
                                  std::to_string(q.mib) + " MiB workspace (" +
                                  std::strerror(err) + ")");
  return os_failure("reserving the workspace image " + image.string(), err);
}

result<bool> workspace_disks::copy_image(const fs::path& image, const workspace_quota& q,
                                         uid_t uid, gid_t gid, bool disposable) {
  if (auto ready = disposable ? take(q, uid, gid) : std::nullopt) {
    // Into place without replacing anything (`image` must not exist): its mount is then
    // mount_detached's answer for it.
    if (::renameat2(AT_FDCWD, ready->file.c_str(), AT_FDCWD, image.c_str(), RENAME_NOREPLACE) ==
        0) {
      if (auto key = inode_of(image)) {
        auto& t = handovers();
        std::lock_guard<std::mutex> lock{t.mu};
        t.mounts[*key] = std::move(ready->mount);
        return true;
      }
      ::unlink(image.c_str());
    } else {
      ::unlink(ready->file.c_str());
    }
    ready->mount.reset(); // not usable: the slow way below
  }
  auto tpl = template_for(q, uid, gid);
  if (!tpl) return tpl.error();
  if (!disposable) return sparse_copy(*tpl, image);
  // Made and mounted as the filler makes its images, handed over to mount_detached alike.
  auto blocks = blocks_for(q, uid, gid);
  if (!blocks) return blocks.error();
  auto mnt = mount_fresh(**blocks, image);
  if (!mnt) return mnt.error();
  if (auto key = inode_of(image)) {
    auto& t = handovers();
    std::lock_guard<std::mutex> lock{t.mu};
    t.mounts[*key] = std::move(*mnt);
    return true;
  }
  int err = errno;
  mnt->reset();
  ::unlink(image.c_str());
  return os_failure("stat " + image.string(), err);
}

result<unique_fd> workspace_disks::mount_detached(const fs::path& image, bool durable) {
  unique_fd backing{::open(image.c_str(), O_RDWR | O_CLOEXEC)};
  if (!backing) return os_failure("opening the workspace image " + image.string());
  struct stat st {};
  if (::fstat(backing.get(), &st) == 0)
    if (auto ready = take_handover({st.st_dev, st.st_ino})) return ready;
  return mount_backing(backing.get(), image, durable);
}

result<bool> workspace_disks::remove_image(const fs::path& image) {
  if (auto key = inode_of(image)) take_handover(*key); // a pool mount never taken: unmounted
  if (::unlink(image.c_str()) != 0 && errno != ENOENT)
    return os_failure("removing " + image.string());
  return true;
}

uint64_t disk_floor_bytes(uint64_t fs_bytes) {
  return std::min<uint64_t>(fs_bytes / 20, uint64_t{256} << 20);
}

result<bool> check_disk_floor(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return os_failure("statvfs " + dir.string());
  const uint64_t size = uint64_t(st.f_blocks) * st.f_frsize;
  const uint64_t avail = uint64_t(st.f_bavail) * st.f_frsize;
  const uint64_t floor = disk_floor_bytes(size);
  if (avail >= floor) return true;
  return fail(ec::capacity, "insufficient storage: the file system of " + dir.string() +
                                " has " + std::to_string(avail >> 20) +
                                " MiB free, under its floor of " + std::to_string(floor >> 20) +
                                " MiB; free some space on the host");
}

result<bool> sync_workspace(int root_fd) {
  // A real open (syncfs refuses O_PATH): read-only, never following the guest's links.
  open_how how{};
  how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  unique_fd fd{int(::syscall(SYS_openat2, root_fd, "/workspace", &how, sizeof how))};
  struct statfs st {};
  if (!fd || ::fstatfs(fd.get(), &st) != 0 || st.f_type != EXT4_SUPER_MAGIC) return true;
  if (::syncfs(fd.get()) == 0) return true;
  return fail(ec::guest_failed,
              std::string{workspace_io_error} + ": the sandbox's workspace lost writes (" +
                  std::strerror(errno) +
                  " writing its image back: the host's file system is full or failing); "
                  "what the command wrote may be gone");
}

unique_fd pin_workspace(int root_fd) {
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  unique_fd fd{int(::syscall(SYS_openat2, root_fd, "/workspace", &how, sizeof how))};
  struct statfs st {};
  if (!fd || ::fstatfs(fd.get(), &st) != 0 || st.f_type != EXT4_SUPER_MAGIC) return {};
  return fd;
}

mount_releaser::~mount_releaser() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void mount_releaser::release(unique_fd pinned) {
  if (!pinned) return;
  std::lock_guard<std::mutex> lock{mu_};
  queue_.push_back(std::move(pinned));
  if (!worker_.joinable()) worker_ = std::thread{[this] { run(); }};
  cv_.notify_all();
}

void mount_releaser::drain() {
  std::unique_lock<std::mutex> lock{mu_};
  cv_.wait(lock, [this] { return queue_.empty() && busy_ == 0; });
}

void mount_releaser::run() {
  std::unique_lock<std::mutex> lock{mu_};
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return; // stopping, nothing left
    auto fd = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    lock.unlock();
    fd.reset(); // the unmount and the loop device's detach happen here
    lock.lock();
    --busy_;
    cv_.notify_all();
  }
}

} // namespace guestflow::local
