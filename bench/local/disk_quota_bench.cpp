// What a kernel-enforced workspace quota costs a guest's create and delete, and what the
// alternatives would have cost (guests/workspace_disk.hpp), on this host, in one run:
//
//   backend create/destroy, s-1vcpu-256mb-like guests, with the quota (ext4 image on a loop
//   device) and without (an unbounded host directory), interleaved, N each;
//   the quota's steps alone: sparse copy of the template, loop device + detached ext4
//   mount (done ahead of the create by the pool's filler), unmount (close) + autoclear +
//   unlink;
//   the designs not taken: mke2fs per guest (no template), a tmpfs (size=, nr_inodes=).
//
//   a burst: B creates at once (one thread each, released together) with the quota and
//   without, one burst after the other, R bursts each way: the pool holds 2 images, so most
//   of a burst's creates copy, attach and mount their own, contending with each other.
//
// Goal: create with the quota p50 <= 1.25x create without it (a disk must not cost more
// than a quarter of a create), one at a time and in a burst. Needs root, cgroups and bwrap,
// like the backend's tests.
//   bench_disk_quota [--runs N] [--burst B] [--bursts R] [--out FILE]
#include "controlplane/local/guests/guest_backend.hpp"
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/guests/workspace_disk.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <sys/mount.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace guestflow;
using namespace guestflow::local;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

/// CPU time of the calling thread (ms): a mount's wall time is mostly waiting.
double thread_cpu_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) / 1e6;
}

double ms_since(clock_type::time_point t) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

struct stats {
  std::vector<double> v;
  double pct(double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
  }
};

std::string fmt(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%7.2f", v);
  return b;
}

guest_spec spec_for(int i, uint64_t disk_mib) {
  guest_spec s;
  s.id = "dq" + std::to_string(::getpid()) + "-" + std::to_string(i);
  s.shape_info = shape{"s-1vcpu-256mb", 1, 256, disk_mib};
  s.rootfs = "debian:12";
  s.egress = egress_policy::deny_all();
  return s;
}

/// `n` creates on `b` at once (each on its own thread, released together); each one's wall
/// time goes to `lat`, the burst's (first start to last end) to `wall`. Then every guest
/// made is destroyed (untimed). False when a create failed.
bool burst(guest_backend& b, int n, int first_id, uint64_t disk_mib, stats& lat, stats& wall) {
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::vector<std::optional<result<guest_runtime>>> made(static_cast<size_t>(n));
  std::vector<double> took(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      {
        std::unique_lock<std::mutex> lock{mu};
        cv.wait(lock, [&] { return go; });
      }
      auto t = clock_type::now();
      made[size_t(i)].emplace(b.create(spec_for(first_id + i, disk_mib)));
      took[size_t(i)] = ms_since(t);
    });
  auto t = clock_type::now();
  {
    std::lock_guard<std::mutex> lock{mu};
    go = true;
  }
  cv.notify_all();
  for (auto& th : threads)
    th.join();
  wall.v.push_back(ms_since(t));
  bool ok = true;
  for (int i = 0; i < n; ++i) {
    auto& g = *made[size_t(i)];
    if (!g) {
      std::cerr << "create failed in a burst: " << g.error().message << "\n";
      ok = false;
      continue;
    }
    lat.v.push_back(took[size_t(i)]);
    b.destroy(*g);
  }
  return ok;
}

std::string load_average() {
  std::ifstream in{"/proc/loadavg"};
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

} // namespace

int main(int argc, char** argv) {
  int runs = 40, burst_size = 16, bursts = 5;
  std::string out_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--burst" && i + 1 < argc)
      burst_size = std::max(1, std::atoi(argv[++i]));
    else if (a == "--bursts" && i + 1 < argc)
      bursts = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick")
      runs = 3, bursts = 1;
    else if (a == "--out" && i + 1 < argc)
      out_path = argv[++i];
    else {
      std::cerr << "usage: bench_disk_quota [--runs N | --quick] [--burst B] [--bursts R] "
                   "[--out FILE]\n";
      return 2;
    }
  }
  if (::geteuid() != 0) {
    std::cerr << "bench_disk_quota: needs root (loop devices, cgroups, namespaces)\n";
    return 2;
  }
  char tmpl[] = "/var/tmp/guestflow-disk-bench.XXXXXX"; // on the host's disk, not a tmpfs
  if (!::mkdtemp(tmpl)) return 1;
  const fs::path state = tmpl;
  const uint64_t disk_mib = 1024, inodes = disk_mib * 64;
  const auto load_before = load_average();

  backend_config with_cfg;
  with_cfg.state_dir = state / "with";
  backend_config without_cfg = with_cfg;
  without_cfg.state_dir = state / "without";
  without_cfg.workspace_quota = false;
  // The quota as it was before the pool: every create attaches and mounts its own image.
  backend_config unpooled_cfg = with_cfg;
  unpooled_cfg.state_dir = state / "unpooled";
  unpooled_cfg.workspace_pool = 0;
  guest_backend with{with_cfg}, without{without_cfg}, unpooled{unpooled_cfg};

  // The first create of a size builds its template (mke2fs once per state dir and size).
  auto t0 = clock_type::now();
  auto first = with.create(spec_for(-1, disk_mib));
  const double first_ms = ms_since(t0);
  if (!first) {
    std::cerr << "create failed: " << first.error().message << "\n";
    return 1;
  }
  with.destroy(*first);
  if (auto f = unpooled.create(spec_for(-2, disk_mib))) unpooled.destroy(*f);

  stats create_with, create_without, destroy_with, destroy_without, create_unpooled;
  for (int i = 0; i < runs; ++i) {
    for (int way : {0, 1, 2}) { // quota (pooled), none, quota without the pool
      auto& b = way == 0 ? with : way == 1 ? without : unpooled;
      auto t = clock_type::now();
      auto g = b.create(spec_for(i * 3 + way, disk_mib));
      (way == 0   ? create_with
       : way == 1 ? create_without
                  : create_unpooled)
          .v.push_back(ms_since(t));
      if (!g) {
        std::cerr << "create failed: " << g.error().message << "\n";
        return 1;
      }
      t = clock_type::now();
      b.destroy(*g);
      if (way < 2) (way == 0 ? destroy_with : destroy_without).v.push_back(ms_since(t));
    }
  }

  // Bursts, alternating the two ways; the pool refills between bursts (a burst of creates
  // after a quiet spell, as a fan-out of runs meets the server).
  stats burst_with, burst_without, burst_wall_with, burst_wall_without;
  int next_id = runs * 3;
  for (int r = 0; r < bursts; ++r)
    for (int way : {0, 1}) {
      auto& b = way == 0 ? with : without;
      if (!burst(b, burst_size, next_id, disk_mib, way == 0 ? burst_with : burst_without,
                 way == 0 ? burst_wall_with : burst_wall_without))
        return 1;
      next_id += burst_size;
    }

  // The quota's steps alone, and the designs not taken.
  workspace_disks disks{state / "steps-templates", "/usr/sbin/mke2fs"};
  disks.set_pool_depth(0); // the steps themselves, not the pool's hand-over
  workspace_quota q{disk_mib, inodes};
  stats copy, mount, unmount, mkfs, tmpfs, mount_cpu;
  for (int i = 0; i < runs; ++i) {
    const auto image = state / ("step-" + std::to_string(i) + ".ext4");
    auto t = clock_type::now();
    if (!disks.create_image(image, q, 60000, 60000)) return 1;
    if (i > 0) copy.v.push_back(ms_since(t)); // the first one built the template
    t = clock_type::now();
    const double cpu0 = thread_cpu_ms();
    auto mnt = workspace_disks::mount_detached(image);
    mount.v.push_back(ms_since(t));
    if (!mnt) {
      std::cerr << "mount failed: " << mnt.error().message << "\n";
      return 1;
    }
    t = clock_type::now();
    mnt->reset();
    workspace_disks::remove_image(image);
    unmount.v.push_back(ms_since(t));
    mount_cpu.v.push_back(thread_cpu_ms() - cpu0);

    const auto raw = state / ("mkfs-" + std::to_string(i) + ".ext4");
    t = clock_type::now();
    { std::ofstream f{raw}; }
    fs::resize_file(raw, disk_mib << 20);
    auto r = run_command({"/usr/sbin/mke2fs", "-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0",
                          "-N", std::to_string(inodes), "-O", "^has_journal", "-E",
                          "lazy_itable_init=1,nodiscard", raw.string()});
    mkfs.v.push_back(ms_since(t));
    fs::remove(raw);
    if (!r || r->exit_code != 0) return 1;

    t = clock_type::now();
    int ctx = ::fsopen("tmpfs", FSOPEN_CLOEXEC);
    ::fsconfig(ctx, FSCONFIG_SET_STRING, "size", (std::to_string(disk_mib) + "m").c_str(), 0);
    ::fsconfig(ctx, FSCONFIG_SET_STRING, "nr_inodes", std::to_string(inodes).c_str(), 0);
    ::fsconfig(ctx, FSCONFIG_CMD_CREATE, nullptr, nullptr, 0);
    int m = ::fsmount(ctx, FSMOUNT_CLOEXEC, 0);
    ::close(ctx);
    ::close(m);
    tmpfs.v.push_back(ms_since(t));
  }
  std::error_code ec_;
  fs::remove_all(state, ec_);

  const double ratio = create_with.pct(0.5) / create_without.pct(0.5);
  const double burst_ratio = burst_with.pct(0.5) / burst_without.pct(0.5);
  std::ostringstream o;
  o << "bench_disk_quota: what a kernel-enforced workspace quota costs a guest (guest_backend, "
       "no HTTP)\n"
    << "host: " << ::sysconf(_SC_NPROCESSORS_ONLN) << " cores; load average " << load_before
    << " at start, " << load_average() << " at end (other sessions share this host)\n"
    << "guests: 256 MiB memory, " << disk_mib << " MiB / " << inodes
    << " inodes of workspace, deny-all; " << runs
    << " creates+destroys each way (3 ways), interleaved; state dir on the host's ext4\n\n"
    << "step                                         p50 ms   p90 ms\n"
    << "create, workspace quota (ext4 image)        " << fmt(create_with.pct(0.5)) << "  "
    << fmt(create_with.pct(0.9)) << "\n"
    << "create, no quota (host directory)           " << fmt(create_without.pct(0.5)) << "  "
    << fmt(create_without.pct(0.9)) << "\n"
    << "create, quota without the pool (before)     " << fmt(create_unpooled.pct(0.5)) << "  "
    << fmt(create_unpooled.pct(0.9)) << "\n"
    << "destroy, workspace quota                    " << fmt(destroy_with.pct(0.5)) << "  "
    << fmt(destroy_with.pct(0.9)) << "\n"
    << "destroy, no quota                           " << fmt(destroy_without.pct(0.5)) << "  "
    << fmt(destroy_without.pct(0.9)) << "\n"
    << "first create of a size (builds template)    " << fmt(first_ms) << "      (once)\n"
    << "  quota step: sparse copy of the template   " << fmt(copy.pct(0.5)) << "  "
    << fmt(copy.pct(0.9)) << "\n"
    << "  quota step: loop device + detached mount  " << fmt(mount.pct(0.5)) << "  "
    << fmt(mount.pct(0.9)) << "\n"
    << "  quota step: unmount + autoclear + unlink  " << fmt(unmount.pct(0.5)) << "  "
    << fmt(unmount.pct(0.9)) << "\n"
    << "  CPU of mount + unmount (this thread)      " << fmt(mount_cpu.pct(0.5)) << "  "
    << fmt(mount_cpu.pct(0.9)) << "   (the rest of their wall time is waiting)\n"
    << "  not taken: mke2fs per guest (no template) " << fmt(mkfs.pct(0.5)) << "  "
    << fmt(mkfs.pct(0.9)) << "\n"
    << "  not taken: tmpfs size=,nr_inodes= mount   " << fmt(tmpfs.pct(0.5)) << "  "
    << fmt(tmpfs.pct(0.9)) << "\n"
    << "burst of " << burst_size << " creates at once, " << bursts << " bursts each way:\n"
    << "  create in a burst, workspace quota        " << fmt(burst_with.pct(0.5)) << "  "
    << fmt(burst_with.pct(0.9)) << "\n"
    << "  create in a burst, no quota               " << fmt(burst_without.pct(0.5)) << "  "
    << fmt(burst_without.pct(0.9)) << "\n"
    << "  whole burst, workspace quota              " << fmt(burst_wall_with.pct(0.5)) << "  "
    << fmt(burst_wall_with.pct(0.9)) << "\n"
    << "  whole burst, no quota                     " << fmt(burst_wall_without.pct(0.5))
    << "  " << fmt(burst_wall_without.pct(0.9)) << "\n\n"
    << "goal: create p50 with quota / without: " << fmt(create_with.pct(0.5)) << " / "
    << fmt(create_without.pct(0.5)) << " ms = " << fmt(ratio)
    << "x (<= 1.25x): " << (ratio <= 1.25 ? "met" : "MISSED") << "\n"
    << "goal in a burst of " << burst_size
    << ": create p50 with quota / without: " << fmt(burst_with.pct(0.5)) << " / "
    << fmt(burst_without.pct(0.5)) << " ms = " << fmt(burst_ratio)
    << "x (<= 1.25x): " << (burst_ratio <= 1.25 ? "met" : "MISSED") << "\n"
    << "create with the quota takes an image its pool copied, attached and mounted ahead "
       "(workspace_disk.hpp): the loop + mount step above runs on the pool's filler thread, "
       "off the create's path\n"
    << "destroy: the unmount and loop detach run on the backend's releaser thread after "
       "destroy returns (they wait for RCU grace periods)\n";
  std::cout << o.str();
  if (!out_path.empty()) std::ofstream{out_path} << o.str();
  return 0;
}
