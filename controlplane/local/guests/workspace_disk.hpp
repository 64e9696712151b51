#pragma once

#include "common/unique_fd.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <utility>
#include <vector>

/// A guest's /workspace as a file system of its own, so that the kernel enforces its size and
/// inode count: an ext4 image in a sparse file next to the guest's other state, on a loop
/// device, mounted *detached* (fsmount: in no mount namespace) and attached by the guest's
/// shim in its private mount namespace only (sandbox_launch.hpp). The host's mount table
/// never holds it, so no other namespace copies it; the last guest process to exit drops
/// the last mount, and the loop device (LO_FLAGS_AUTOCLEAR) detaches itself. Writing past
/// the size fails with ENOSPC, past the inodes with ENOSPC on create, for the guest and for
/// the control plane's files API alike (ext4 is made with no reserved blocks). The image
/// persists across the control plane's and the guest's death until destroy unlinks it.
///
/// Images are not formatted per guest (mke2fs costs ~30 ms): one template per size is made
/// on first use (mke2fs without a journal, lazy inode tables, root owned by the guest uid,
/// no lost+found) and each guest gets a copy of its few hundred KiB of metadata: a
/// disposable guest's image is a sparse file attached empty, the template's blocks written
/// through its loop device (mount_detached says why); a persistent guest's is a sparse copy
/// (a reflink where the host file system has them).
///
/// Nor are they mounted on the create's path: attaching a loop device and mounting costs
/// ~25 ms and contends with the unmounts and loop detaches of guests being deleted (RCU
/// grace periods). A filler thread keeps a few images of each recently used quota copied,
/// attached and mounted ahead of time; create_image hands one over (a rename into place)
/// and mount_detached returns its mount. Pool images live in the templates dir as staging
/// files (a dead process's are removed), their mounts die with the process.
namespace guestflow::local {

/// The limits of one workspace.
struct workspace_quota {
  uint64_t mib = 0;    ///< the file system's size (usable space is ~2-4% less: ext4 metadata)
  uint64_t inodes = 0; ///< files, directories and symlinks (ext4 rounds up to a full group)
};

/// The image file of a guest whose workspace directory (the record's `workspace`) is `ws`.
std::filesystem::path workspace_image_path(const std::filesystem::path& ws);

constexpr size_t max_workspace_pool = 16;

/// GUESTFLOW_WORKSPACE_POOL's value (null or empty: the default, 2) as the number of quota
/// images kept ready per size; anything but an integer in 0..16 is refused, naming it.
result<size_t> workspace_pool_from(const char* value);

/// A workspace template's size and data extents (its holes left out), in memory: each fresh
/// image is written from them. `dev` and `ino` name the template file they were read from.
struct workspace_template_blocks {
  off_t size = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  std::vector<std::pair<off_t, std::string>> extents; ///< offset, bytes
};

class workspace_disks {
public:
  /// Templates are kept in `templates_dir` (created 0700 on first use); `mke2fs` formats
  /// them (run through the spawn helper, never fork()).
  /// `pool_depth` images per size are kept ready (set_pool_depth).
  workspace_disks(std::filesystem::path templates_dir, std::string mke2fs,
                  size_t pool_depth = 2);
  /// Stops the filler and releases the images it had ready (unmounted, unlinked).
  ~workspace_disks();
  workspace_disks(const workspace_disks&) = delete;
  workspace_disks& operator=(const workspace_disks&) = delete;

  /// Writes a fresh, empty workspace image at `image` (which must not exist) whose root
  /// directory is owned by uid:gid. On failure nothing is left at `image`. A ready image of
  /// the pool is renamed into place when there is one and `reserve` is not asked (its mount
  /// is mount_detached's answer for `image`); the quota is remembered, so that the filler
  /// keeps some ready.
  ///
  /// The state dir's file system is checked first: under its floor (disk_floor) the create
  /// is refused with `capacity`. `reserve` allocates every block of the image (fallocate)
  /// so that its file system can never run out of host disk: for persistent guests, whose
  /// data is kept; refused with `capacity` when the host cannot hold it. Disposable images
  /// stay sparse (10,000 guests in flight would not fit otherwise): a write the host cannot
  /// hold is caught by sync_workspace after each exec instead.
  result<bool> create_image(const std::filesystem::path& image, const workspace_quota& q,
                            uid_t uid, gid_t gid, bool reserve = false);

  /// The image's file system as a detached mount (nosuid, nodev, noatime), for
  /// move_mount(2). Closing the descriptor before it is attached unmounts it; the loop
  /// device goes with the last mount. An image create_image made disposable (no `reserve`)
  /// gets the mount made with it or ahead of time by the pool (found by the file's inode, so
  /// a rename cannot confuse it), not durable. Not durable: mounted `nobarrier`, so that
  /// syncfs and the unmount write the guest's data into the image's page cache (errors
  /// reported as ever: a host that cannot hold a block fails its write at once) without an
  /// fsync of the image on the host: a disposable workspace does not outlive a host crash,
  /// and its blocks are never written to (and then discarded from) the host's disk unless it
  /// lives longer than the kernel's writeback delay. `durable` (a persistent guest's kept or
  /// reserved image) keeps the flushes, so the guest's fsync reaches the host's disk.
  static result<unique_fd> mount_detached(const std::filesystem::path& image,
                                          bool durable = true);

  /// Removes an image (a missing one is fine), with a pool mount not yet taken.
  static result<bool> remove_image(const std::filesystem::path& image);

  /// Images kept ready per quota (0: none, and the ready ones are released).
  void set_pool_depth(size_t depth);
  /// Ready images right now, all quotas together (tests, benches).
  size_t pool_ready();
  /// Returns once the pool holds `depth` ready images of every quota it keeps, or the filler
  /// has failed; false then (benches, tests).
  bool wait_pool_full(std::chrono::milliseconds deadline);

private:
  /// create_image's copy (from the pool, whose mounts are not durable, only when
  /// `disposable`; or from the template).
  result<bool> copy_image(const std::filesystem::path& image, const workspace_quota& q,
                          uid_t uid, gid_t gid, bool disposable);
  result<std::filesystem::path> template_for(const workspace_quota& q, uid_t uid, gid_t gid);
  /// The template's blocks, read once per template file (a template replaced at its path is
  /// read again).
  result<std::shared_ptr<const workspace_template_blocks>> blocks_for(const workspace_quota& q,
                                                                      uid_t uid, gid_t gid);

  /// One image copied, attached and mounted ahead of a create.
  struct ready_image {
    std::filesystem::path file;
    unique_fd mount;
  };
  struct pool {
    workspace_quota quota;
    uid_t uid = 0;
    gid_t gid = 0;
    std::deque<ready_image> ready;
    uint64_t last_used = 0; ///< a use counter's value: the least recent pool goes first
  };
  void fill();
  std::optional<ready_image> take(const workspace_quota& q, uid_t uid, gid_t gid);

  std::filesystem::path dir_;
  std::string mke2fs_;
  std::mutex mu_; ///< one template build at a time
  std::mutex blocks_mu_;
  std::map<std::string, std::shared_ptr<const workspace_template_blocks>> blocks_; ///< by name

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::map<std::string, pool> pools_; ///< by template name; at most max_pools
  size_t depth_;
  uint64_t uses_ = 0;
  bool stopping_ = false;
  bool fill_failed_ = false; ///< the last fill failed: creates go the slow way meanwhile
  std::thread filler_;       ///< started by the first create
};

/// The free space a file system must keep for a workspace create to be admitted: 5% of its
/// size, at most 256 MiB (records, templates and sparse images' growth live there too).
uint64_t disk_floor_bytes(uint64_t fs_bytes);

/// Refuses (`capacity`) when the file system holding `dir` has less than its floor free.
result<bool> check_disk_floor(const std::filesystem::path& dir);

/// Writes back the workspace file system of the guest whose root is `root_fd` (O_PATH) and
/// says whether any of its writes were lost since the last check: a sparse image's blocks
/// are allocated on the host only when the loop device writes them, so with the host's file
/// system full a program's buffered write "succeeds" and the kernel drops it later (`lost
/// async page write`). syncfs(2) forces that writeback now and reports the file system's
/// write errors (errseq: each error once, to the first syncfs after it). A failure's code is
/// `guest_failed`, its message starts with `workspace_io_error:`. No workspace of its own:
/// true.
result<bool> sync_workspace(int root_fd);

/// The prefix of every message that says a workspace lost writes.
inline constexpr const char* workspace_io_error = "workspace_io_error";

/// A descriptor on the workspace file system of the guest whose root is `root_fd` (O_PATH),
/// or none when it has no file system of its own. Held across the guest's death, it makes
/// the unmount (and the loop device's detach) happen at its close instead of in the guest's
/// last exiting process — which a delete waits for.
unique_fd pin_workspace(int root_fd);

/// Closes pinned workspaces (pin_workspace) on a thread of its own: the last reference's
/// unmount and loop detach wait for RCU grace periods (ms on a quiet host, tens of ms on a
/// busy one) that a delete need not wait for. The destructor releases whatever is left.
class mount_releaser {
public:
  mount_releaser() = default;
  ~mount_releaser();
  mount_releaser(const mount_releaser&) = delete;
  mount_releaser& operator=(const mount_releaser&) = delete;

  void release(unique_fd pinned);
  /// Returns once everything handed over so far is released (benches, tests).
  void drain();

private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<unique_fd> queue_;
  size_t busy_ = 0;
  bool stopping_ = false;
  std::thread worker_; ///< started on the first release
};

} // namespace guestflow::local
