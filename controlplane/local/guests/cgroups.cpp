#include "controlplane/local/guests/cgroups.hpp"

#include "common/text.hpp"
#include "common/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <linux/magic.h>
#include <optional>
#include <poll.h>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local {
namespace {

using clock_type = std::chrono::steady_clock;

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

bool put(const std::string& path, const std::string& value) {
  unique_fd fd{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  if (!fd) return false;
  return ::write(fd.get(), value.data(), value.size()) == ssize_t(value.size());
}

/// The whole file; nullopt when it cannot be opened (absent: another controller's file).
std::optional<std::string> read_text(const std::string& path) {
  unique_fd fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd) return std::nullopt;
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fd.get(), buf, sizeof buf)) > 0;)
    out.append(buf, size_t(n));
  return out;
}

std::string get(const std::string& path) {
  return read_text(path).value_or("");
}

/// Value of `key N` in a flat keyed file (memory.events, memory.oom_control, cgroup.events).
uint64_t keyed(const std::string& text, const std::string& key) {
  std::istringstream in{text};
  std::string k;
  uint64_t v = 0;
  while (in >> k >> v)
    if (k == key) return v;
  return 0;
}

/// The directory among `dirs` that holds `file` (the controller's directory in v1).
std::string dir_with(const std::vector<std::string>& dirs, const std::string& file) {
  for (const auto& d : dirs)
    if (exists(d + "/" + file)) return d;
  return {};
}

/// `file` read from the first of `dirs` that has it (v1: the controller's directory), the
/// directories whose path names `controller` tried first: one open where a stat in each
/// directory and then the open were two to four calls. nullopt when none has it.
std::optional<std::string> read_from(std::vector<std::string> dirs, const std::string& file,
                                     const char* controller) {
  std::stable_partition(dirs.begin(), dirs.end(), [&](const std::string& d) {
    return d.find(controller) != std::string::npos;
  });
  for (const auto& d : dirs)
    if (auto text = read_text(d + "/" + file)) return text;
  return std::nullopt;
}

failure sys_error(const std::string& what) {
  return fail(ec::unavailable, what + ": " + std::strerror(errno));
}

void sleep_briefly() {
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

/// The path of `dir` below its hierarchy's mount, as /proc/<pid>/cgroup shows it.
std::string relative_path(const std::string& dir) {
  auto guestflow = dir.rfind("/guestflow/");
  return guestflow == std::string::npos ? dir : dir.substr(guestflow);
}

/// SIGKILLs `pid` only if it is still a member of the guest's cgroup: the pidfd pins the
/// process, so a pid reused by an unrelated host process is never signalled.
void kill_member(pid_t pid, const std::string& rel) {
  unique_fd pidfd{int(::syscall(SYS_pidfd_open, pid, 0))};
  if (!pidfd) return;
  std::ifstream in{"/proc/" + std::to_string(pid) + "/cgroup"};
  std::string line;
  bool member = false;
  while (std::getline(in, line))
    if (line.size() >= rel.size() + 1 &&
        line.compare(line.size() - rel.size(), rel.size(), rel) == 0 &&
        line[line.size() - rel.size() - 1] == ':')
      member = true;
  pollfd p{pidfd.get(), POLLIN, 0};
  if (!member || ::poll(&p, 1, 0) != 0)
    return; // not ours, or it exited while we looked (the pid may now be someone else's)
  ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
}

/// Waits until every process of `pids` has exited (its pidfd readable: by then the kernel
/// has taken it out of its cgroups), `limit` at most: a pid gone already counts as exited.
/// Blocking, where polling cgroup.procs every millisecond cost a v1 pidlist (allocated,
/// sorted, its release queued to a kworker) and a wake-up per poll.
void wait_exited(const std::vector<pid_t>& pids, std::chrono::milliseconds limit) {
  std::vector<unique_fd> fds;
  std::vector<pollfd> polled;
  bool blind = false; // a live member without a pidfd (out of descriptors): waited for blind
  for (pid_t pid : pids) {
    unique_fd fd{int(::syscall(SYS_pidfd_open, pid, 0))};
    if (!fd) {
      blind = blind || errno != ESRCH;
      continue;
    }
    polled.push_back({fd.get(), POLLIN, 0});
    fds.push_back(std::move(fd));
  }
  if (blind) sleep_briefly(); // as the loop did before: never a busy loop
  const auto until = clock_type::now() + limit;
  while (!polled.empty()) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_type::now());
    if (left.count() <= 0) return;
    int n = ::poll(polled.data(), polled.size(), int(left.count()) + 1);
    if (n < 0 && errno != EINTR) return;
    polled.erase(std::remove_if(polled.begin(), polled.end(),
                                [](const pollfd& p) { return p.revents != 0; }),
                 polled.end());
  }
}

void kill_members(const std::vector<std::string>& dirs) {
  for (const auto& d : dirs) {
    auto rel = relative_path(d);
    for (pid_t pid : cgroup_pids(d))
      kill_member(pid, rel);
  }
}

/// rmdir `dir` once its processes are gone: 0 when it is (or was) removed, else the errno —
/// EBUSY when it still has members. One that lists none yet refuses for a moment is retried
/// until `deadline`.
int remove_empty(const std::string& dir, clock_type::time_point deadline) {
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return 0;
    const int err = errno;
    if (err != EBUSY || clock_type::now() > deadline || !cgroup_pids(dir).empty()) return err;
    sleep_briefly();
  }
}

} // namespace

result<cgroup_layout> detect_cgroups(const std::string& fs_root) {
  struct statfs sfs;
  const bool cgroup2 =
      ::statfs(fs_root.c_str(), &sfs) == 0 && sfs.f_type == CGROUP2_SUPER_MAGIC;
  std::ifstream mountinfo;
  if (!cgroup2) mountinfo.open("/proc/self/mountinfo");
  return cgroup_layout_at(fs_root, cgroup2, mountinfo);
}

result<cgroup_layout> cgroup_layout_at(const std::string& fs_root, bool cgroup2,
                                       std::istream& in) {
  cgroup_layout layout;
  if (cgroup2) {
    auto controllers = " " + std::string{trim(get(fs_root + "/cgroup.controllers"))} + " ";
    for (const char* needed : {"memory", "pids"})
      if (controllers.find(std::string{" "} + needed + " ") == std::string::npos)
        return fail(ec::unavailable, std::string{"cgroup v2 lacks the "} + needed +
                                         " controller; guests need memory and pids limits");
    layout.v2 = true;
    layout.v2_root = fs_root;
    return layout;
  }
  // cgroup v1: one hierarchy per controller (possibly co-mounted); read the mount table.
  std::string line;
  while (std::getline(in, line)) {
    auto sep = line.find(" - ");
    if (sep == std::string::npos) continue;
    std::istringstream pre{line.substr(0, sep)}, post{line.substr(sep + 3)};
    std::string id, parent, devno, root, mount_point, fstype, source, super_opts;
    pre >> id >> parent >> devno >> root >> mount_point;
    post >> fstype >> source >> super_opts;
    if (fstype != "cgroup" || mount_point.rfind(fs_root, 0) != 0) continue;
    std::istringstream opts{super_opts};
    std::string opt;
    while (std::getline(opts, opt, ','))
      if (opt == "memory" || opt == "pids" || opt == "freezer" || opt == "cpu")
        layout.v1_mounts.emplace(opt, mount_point);
  }
  for (const char* needed : {"memory", "pids", "freezer"})
    if (!layout.v1_mounts.count(needed))
      return fail(ec::unavailable, std::string{"no cgroup v1 "} + needed +
                                       " hierarchy is mounted; guests need memory, pids and "
                                       "freezer");
  return layout;
}

std::vector<std::string> guest_cgroup_dirs(const cgroup_layout& layout, const std::string& id) {
  if (layout.v2) return {layout.v2_root + "/guestflow/" + id};
  std::vector<std::string> out;
  for (const char* c : {"memory", "pids", "freezer", "cpu"})
    if (auto m = layout.v1_mounts.find(c); m != layout.v1_mounts.end())
      out.push_back(m->second + "/guestflow/" + id);
  return out;
}

result<std::vector<std::string>> create_guest_cgroups(const cgroup_layout& layout,
                                                      const std::string& id,
                                                      const cgroup_limits& limits) {
  std::vector<std::string> made;
  auto undo = [&](failure f) -> failure {
    for (auto i = made.rbegin(); i != made.rend(); ++i)
      ::rmdir(i->c_str());
    return f;
  };
  // One mkdir per hierarchy: the parent is made only when the guest's own mkdir finds it
  // missing (the first guest of a hierarchy), not tried (EEXIST) on every create.
  auto make = [&](const std::string& parent) -> result<std::string> {
    auto dir = parent + "/" + id;
    if (::mkdir(dir.c_str(), 0755) != 0) {
      if (errno != ENOENT) return sys_error("mkdir " + dir);
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
        return sys_error("mkdir " + parent);
      if (::mkdir(dir.c_str(), 0755) != 0) return sys_error("mkdir " + dir);
    }
    made.push_back(dir);
    return dir;
  };
  auto must_put = [&](const std::string& path, const std::string& value) -> result<bool> {
    if (!put(path, value)) return sys_error("write " + value + " to " + path);
    return true;
  };

  if (layout.v2) {
    // Controllers must be enabled in every ancestor's subtree_control (the root's usually
    // is on systemd hosts); what is missing shows up as a missing limit file below.
    const auto parent = layout.v2_root + "/guestflow";
    for (const char* c : {"+memory", "+pids", "+cpu"})
      put(layout.v2_root + "/cgroup.subtree_control", c);
    if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
      return sys_error("mkdir " + parent);
    for (const char* c : {"+memory", "+pids", "+cpu"})
      put(parent + "/cgroup.subtree_control", c);
    auto dir = make(parent);
    if (!dir) return undo(dir.error());
    for (auto [file, value] : {std::pair<std::string, std::string>{
                                   "memory.max", std::to_string(limits.memory_bytes)},
                               {"pids.max", std::to_string(limits.pids_max)}})
      if (auto ok = must_put(*dir + "/" + file, value); !ok) return undo(ok.error());
    put(*dir + "/memory.swap.max", "0");
    if (limits.vcpu > 0)
      put(*dir + "/cpu.weight", std::to_string(std::min<uint32_t>(10000, 100 * limits.vcpu)));
    return made;
  }

  for (const char* c : {"memory", "pids", "freezer", "cpu"}) {
    auto m = layout.v1_mounts.find(c);
    if (m == layout.v1_mounts.end()) continue;
    auto dir = make(m->second + "/guestflow");
    if (!dir) return undo(dir.error());
  }
  const auto mem = layout.v1_mounts.at("memory") + "/guestflow/" + id;
  const auto pids = layout.v1_mounts.at("pids") + "/guestflow/" + id;
  if (auto ok = must_put(mem + "/memory.limit_in_bytes", std::to_string(limits.memory_bytes));
      !ok)
    return undo(ok.error());
  put(mem + "/memory.memsw.limit_in_bytes",
      std::to_string(limits.memory_bytes)); // no swap either
  if (auto ok = must_put(pids + "/pids.max", std::to_string(limits.pids_max)); !ok)
    return undo(ok.error());
  if (auto cpu = layout.v1_mounts.find("cpu"); cpu != layout.v1_mounts.end() && limits.vcpu > 0)
    put(cpu->second + "/guestflow/" + id + "/cpu.shares", std::to_string(1024 * limits.vcpu));
  return made;
}

std::vector<std::string> procs_files(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs)
    out.push_back(d + "/cgroup.procs");
  return out;
}

result<bool> set_frozen(const std::vector<std::string>& dirs, bool frozen,
                        std::chrono::milliseconds timeout) {
  const auto deadline = clock_type::now() + timeout;
  if (auto v1 = dir_with(dirs, "freezer.state"); !v1.empty()) {
    const std::string want = frozen ? "FROZEN" : "THAWED";
    const auto file = v1 + "/freezer.state";
    for (;;) {
      if (!put(file, want)) return sys_error("write " + want + " to " + file);
      if (trim(get(file)) == want) return true;
      if (clock_type::now() > deadline)
        return fail(ec::unavailable, "the guest did not reach " + want + " in time");
      sleep_briefly();
    }
  }
  if (auto v2 = dir_with(dirs, "cgroup.freeze"); !v2.empty()) {
    if (!put(v2 + "/cgroup.freeze", frozen ? "1" : "0"))
      return sys_error("write cgroup.freeze in " + v2);
    while (keyed(get(v2 + "/cgroup.events"), "frozen") != (frozen ? 1U : 0U)) {
      if (clock_type::now() > deadline)
        return fail(ec::unavailable, std::string{"the guest did not "} +
                                         (frozen ? "freeze" : "thaw") + " in time");
      sleep_briefly();
    }
    return true;
  }
  return fail(ec::not_found, "the guest has no freezer cgroup (already destroyed?)");
}

bool is_frozen(const std::vector<std::string>& dirs) {
  if (auto v1 = read_from(dirs, "freezer.state", "/freezer")) return trim(*v1) != "THAWED";
  if (auto v2 = read_from(dirs, "cgroup.freeze", "")) return trim(*v2) == "1";
  return false;
}

uint64_t oom_kill_count(const std::vector<std::string>& dirs) {
  if (auto v1 = read_from(dirs, "memory.oom_control", "/memory")) return keyed(*v1, "oom_kill");
  if (auto v2 = read_from(dirs, "memory.events", "")) return keyed(*v2, "oom_kill");
  return 0;
}

std::vector<pid_t> cgroup_pids(const std::string& dir) {
  std::vector<pid_t> out;
  std::ifstream in{dir + "/cgroup.procs"};
  pid_t pid;
  while (in >> pid)
    out.push_back(pid);
  return out;
}

result<bool> kill_and_remove(const std::vector<std::string>& dirs,
                             std::chrono::milliseconds timeout) {
  // Every directory counts as live without a stat of each (four a v1 delete): one that is
  // missing lists no member and its rmdir answers ENOENT, which counts as removed.
  const std::vector<std::string>& live = dirs;
  if (live.empty()) return true;
  const auto deadline = clock_type::now() + timeout;

  // v2: cgroup.kill is atomic (it includes whatever forks meanwhile). v1: no freezer on
  // this path — every freeze and thaw flips the kernel's freezer static key (code patching
  // and an interrupt on every CPU, per guest). SIGKILL every member instead: the guest's
  // pid-namespace init is one of them, and its death takes every process of its namespace
  // with it, forked after the snapshot or not; the members outside it (the shim, a helper
  // starting a command) do not fork. Only if members keep appearing anyway is the freezer
  // the fallback (a frozen cgroup cannot fork, so its snapshot is complete).
  // Only a v2 guest has cgroup.kill, and it has one directory: one stat, not one a hierarchy.
  const bool atomic_kill = live.size() == 1 && exists(live.front() + "/cgroup.kill");
  if (atomic_kill) {
    put(live.front() + "/cgroup.kill", "1");
  } else if (is_frozen(live)) {
    // A paused guest: its members die once thawed (SIGKILL stays pending meanwhile).
    kill_members(live);
    set_frozen(live, false, std::chrono::milliseconds(2000));
  }
  std::set<pid_t> killed;
  int rounds_with_newcomers = 0;
  bool froze = false;
  // A process joins the guest's hierarchies in procs_files' order and dies out of all at
  // once, so the first directory holds every member: it alone is polled and signalled (on
  // v1 each member was read and killed once per hierarchy, four times). Once it is empty
  // the directories are removed; one that refuses (EBUSY: it still has a member) has every
  // directory polled from then on. Not reading each one's cgroup.procs first saves a v1
  // pid list (built, sorted, its release queued to a kworker) per hierarchy.
  std::vector<std::string> polled{live.front()};
  for (;;) {
    std::vector<pid_t> members;
    std::vector<std::pair<std::string, pid_t>> seen; // each member, with where it was read
    for (const auto& d : polled)
      for (pid_t pid : cgroup_pids(d)) {
        members.push_back(pid);
        seen.emplace_back(relative_path(d), pid);
      }
    if (members.empty()) {
      int err = 0;
      for (const auto& d : live)
        if ((err = remove_empty(d, deadline)) != 0) {
          if (err != EBUSY)
            return fail(ec::unavailable, "rmdir " + d + ": " + std::strerror(err));
          if (polled.size() == live.size() && clock_type::now() > deadline)
            return fail(ec::unavailable, "processes of the guest survive SIGKILL (cgroup " + d +
                                             " is not empty)");
          break;
        }
      if (err == 0) return true;
      polled = live;
      continue;
    }
    if (clock_type::now() > deadline)
      return fail(ec::unavailable, "processes of the guest survive SIGKILL (cgroup " + live[0] +
                                       " is not empty)");
    bool newcomers = false;
    for (pid_t pid : members)
      newcomers |= killed.insert(pid).second;
    if (newcomers && !atomic_kill && !froze && ++rounds_with_newcomers > 3) {
      froze = bool(set_frozen(live, true, std::chrono::milliseconds(2000)));
      kill_members(live);
      if (froze || is_frozen(live)) set_frozen(live, false, std::chrono::milliseconds(2000));
      continue;
    }
    if (newcomers || atomic_kill) // the members just read (kill_member checks each), no re-read
      for (const auto& [rel, pid] : seen)
        kill_member(pid, rel);
    // Until the members seen have exited (then cgroup.procs is read again: one that forked
    // meanwhile left a newcomer), at most 50 ms a round, so that the deadline still holds.
    wait_exited(members, std::min<std::chrono::milliseconds>(
                             std::chrono::milliseconds(50),
                             std::max(std::chrono::milliseconds(1),
                                      std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - clock_type::now()))));
  }
}

} // namespace guestflow::local
