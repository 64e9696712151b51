// Persistent guests under a workspace root shared by a fleet (`--workspace-root`): one owner
// at a time (guest_owners), a cold boot from the kept workspace on another node once the
// owner is lost, and a node that comes back forgetting what it no longer owns. The rest of
// control_plane is control_plane.cpp and control_plane_lifecycle.cpp.
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace guestflow::local {
namespace fs = std::filesystem;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A name that is one safe path segment (reusable guests' names are `gf-c-…`).
bool plain_segment(const std::string& s) {
  if (s.empty() || s == "." || s == ".." || s.size() > 128) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

result<std::string> read_text(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  if (!in)
    return fail(ec::unavailable, "cannot read " + p.string() + ": " + std::strerror(errno));
  std::string text{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  return text;
}

/// A guest a node back from a loss may find another node owns: stopped (its processes went
/// with the host), or running / paused (only the control plane died and its guest ran on:
/// killed now, as the new owner may have cold-booted it meanwhile).
bool forgettable(sandbox_status s) {
  return s == sandbox_status::stopped || s == sandbox_status::running ||
         s == sandbox_status::paused;
}

/// The death watch (control_plane.hpp): reads cgroup directories, one a line, until EOF —
/// or, with a hang limit ($2 polls of 0.1 s), until the control plane ($1) has been stopped
/// that long (state T or t in /proc: SIGSTOPped, hung, renewing no lease while its guests
/// would write on) — then kills every process in them: cgroup v2's atomic cgroup.kill, else
/// (v1) each pid listed, a few rounds (a guest's pid 1 among them: its pid namespace goes
/// with it). bash for read's fractional timeout; no fork per poll.
constexpr const char* watchdog_script = R"(set -f
cp=$1 limit=$2 dirs= part= stopped=0
while :; do
  IFS= read -r -t 0.1 d; rc=$?
  if [ $rc -eq 0 ]; then dirs="$dirs
$part$d"; part=; continue; fi
  [ $rc -gt 128 ] || break
  part=$part$d
  [ "$limit" -gt 0 ] || continue
  line=
  read -r line < /proc/$cp/stat 2>/dev/null || break
  st=${line##*) }; st=${st%% *}
  case $st in T|t) stopped=$((stopped+1)); [ $stopped -lt $limit ] || break ;; *) stopped=0 ;; esac
done
IFS='
'
for d in $dirs; do
  if [ -e "$d/cgroup.kill" ]; then echo 1 > "$d/cgroup.kill"
  elif [ -e "$d/cgroup.procs" ]; then
    for round in 1 2 3; do
      while read -r p; do kill -9 "$p"; done < "$d/cgroup.procs"
    done
  fi
done 2>/dev/null
)";

bool send_all(int fd, const std::string& text) {
  size_t at = 0;
  while (at < text.size()) {
    auto n = ::send(fd, text.data() + at, text.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

std::string lines_of(const std::vector<std::string>& dirs) {
  std::string out;
  for (const auto& d : dirs)
    if (!d.empty() && d.find('\n') == std::string::npos) out += d + "\n";
  return out;
}

} // namespace

result<bool> control_plane::watch_shared(const guest_runtime& rt) {
  if (cfg_.workspace_root.empty()) return true;
  auto told = lines_of(rt.cgroup_dirs);
  if (watch_.socket.get() >= 0 && send_all(watch_.socket.get(), told)) return true;
  // None yet, or it died: a new one, told every shared guest running now.
  end_watch();
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return fail(ec::unavailable, std::string{"the shared guests' watchdog: socketpair: "} +
                                     std::strerror(errno));
  unique_fd mine{sv[0]}, theirs{sv[1]};
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, theirs.get(), 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  // Its own session: a signal to the server's process group (a terminal's ^C, a
  // supervisor's kill of the group) leaves it to do its job.
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  const auto self = std::to_string(::getpid());
  const auto polls = std::to_string(cfg_.hang_limit.count() / 100); // of 0.1 s each
  const char* argv[] = {
      "bash",       "-c",          watchdog_script, "guestflow-shared-watchdog",
      self.c_str(), polls.c_str(), nullptr};
  pid_t pid = -1;
  int rc =
      ::posix_spawn(&pid, "/bin/bash", &fa, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return fail(ec::unavailable,
                std::string{"the shared guests' watchdog: cannot start /bin/bash: "} +
                    std::strerror(rc));
  watch_.pid = pid;
  watch_.socket = std::move(mine);
  std::string all_dirs = told;
  for (const auto& [id, g] : guests_)
    if (g.rec.persistent && &g.rec.runtime != &rt &&
        (g.rec.status == sandbox_status::running || g.rec.status == sandbox_status::paused) &&
        !g.rec.runtime.workspace.empty() &&
        g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root)
      all_dirs += lines_of(g.rec.runtime.cgroup_dirs);
  if (send_all(watch_.socket.get(), all_dirs)) return true;
  return fail(ec::unavailable,
              "the shared guests' watchdog (pid " + std::to_string(pid) + ") does not read");
}

void control_plane::end_watch() {
  if (watch_.pid < 0) return;
  watch_.socket.reset(); // EOF: it kills what it was told of, then exits
  // Bounded: one that does not exit within 5 s is killed (its guests' own stops follow).
  unique_fd pidfd{static_cast<int>(::syscall(SYS_pidfd_open, watch_.pid, 0))};
  if (pidfd.get() >= 0) { // else reaped already
    pollfd p{pidfd.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) != 1)
      ::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0);
    ::waitpid(watch_.pid, nullptr, 0);
  }
  watch_.pid = -1;
}

std::optional<fs::path> control_plane::shared_dir(const sandbox_create_request& req) const {
  if (cfg_.workspace_root.empty() || !req.persistent || !req.name) return std::nullopt;
  return cfg_.workspace_root / *req.name;
}

result<bool> control_plane::claim_shared(const sandbox_create_request& req, const fs::path& dir,
                                         guest_spec& spec) {
  if (!plain_segment(*req.name))
    return fail(ec::bad_request, "a persistent sandbox's name names its directory under the "
                                 "workspace root: use [A-Za-z0-9._-], at most 128, got '" +
                                     *req.name + "'");
  if (cfg_.owners)
    if (auto ok = cfg_.owners->acquire(*req.name); !ok) return ok.error();
  auto give_up = [&](failure f) -> failure {
    if (cfg_.owners) cfg_.owners->release(*req.name);
    return f;
  };
  spec.guest_dir = dir;
  const auto kept = dir / shared_spec_file;
  if (::access(kept.c_str(), F_OK) != 0) return true; // a new guest
  // A takeover: the guest was made (on this node or another) and its workspace is kept.
  auto text = read_text(kept);
  if (!text) return give_up(text.error());
  auto was = decode<sandbox_create_request>(*text);
  if (!was)
    return give_up(fail(ec::unavailable, "the kept spec " + kept.string() +
                                             " is unreadable: " + was.error().message));
  if (was->shape != req.shape)
    return give_up(conflict("persistent sandbox " + *req.name + " was made with shape " +
                            was->shape + " (its kept workspace is that size), not " +
                            req.shape));
  spec.kept_workspace = true;
  return true;
}

result<bool> control_plane::write_shared_spec(const sandbox_create_request& req,
                                              const fs::path& dir) {
  const auto path = dir / shared_spec_file;
  const auto tmp = dir / (std::string{shared_spec_file} + ".tmp");
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << encode(req);
    out.flush();
    if (!out)
      return fail(ec::unavailable,
                  "cannot write " + tmp.string() + ": " + std::strerror(errno));
  }
  std::error_code ec_;
  fs::rename(tmp, path, ec_);
  if (ec_) return fail(ec::unavailable, "cannot write " + path.string() + ": " + ec_.message());
  return true;
}

result<bool> control_plane::may_start(const guest_spec& spec) {
  if (spec.guest_dir.empty() || !cfg_.owners) return true;
  auto ok = cfg_.owners->acquire(spec.name);
  if (ok) return true;
  auto owner = cfg_.owners->other_owner(spec.name);
  if (!owner || owner->empty()) return ok.error(); // fenced, or etcd unreachable: retry later
  std::lock_guard<std::mutex> lock{mu_};
  auto& g = guests_.at(spec.id);
  forget(g, *owner);
  settled_.notify_all();
  gate_.changed();
  return fail(ec::not_found, "sandbox " + spec.id + " (" + spec.name + ") is owned by node " +
                                 *owner +
                                 " now (it took the guest over while this node was lost); "
                                 "this node forgot it");
}

void control_plane::forget(guest& g, const std::string& owner) {
  // Local leftovers only (processes, cgroups, netns): the workspace is the new owner's.
  guest_runtime local = g.rec.runtime;
  local.workspace.clear();
  backend_.stop(local);
  g.rec.status = sandbox_status::destroyed;
  g.rec.ended_at = unix_now();
  g.rec.note = "taken over by node " + owner + " (its workspace is shared)";
  save(g);
}

void control_plane::stop_shared() {
  if (cfg_.workspace_root.empty()) return;
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock{mu_};
    for (const auto& [id, g] : guests_)
      if (g.rec.persistent && !g.rec.runtime.workspace.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root &&
          (g.rec.status == sandbox_status::running || g.rec.status == sandbox_status::paused))
        ids.push_back(id);
  }
  for (const auto& id : ids)
    if (auto ok = stop_guest(id, false,
                             "stopped: the node was fenced (its fleet lease may "
                             "expire and another node take the guest over)");
        !ok && cfg_.warn)
      cfg_.warn("fence: cannot stop " + id + ": " + ok.error().message);
}

void control_plane::forget_taken_over() {
  if (cfg_.workspace_root.empty() || !cfg_.owners) return;
  std::vector<std::pair<std::string, std::string>> shared; // id, name
  {
    std::lock_guard<std::mutex> lock{mu_};
    for (const auto& [id, g] : guests_)
      if (g.rec.persistent && forgettable(g.rec.status) && !g.rec.runtime.workspace.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root)
        shared.emplace_back(id, g.rec.name);
  }
  for (const auto& [id, name] : shared) {
    auto owner = cfg_.owners->other_owner(name);
    if (!owner || owner->empty()) continue;
    std::lock_guard<std::mutex> lock{mu_};
    auto i = guests_.find(id);
    if (i == guests_.end() || !forgettable(i->second.rec.status)) continue;
    forget(i->second, *owner);
    gate_.changed();
    if (cfg_.warn)
      cfg_.warn("sandbox " + id + " (" + name + ") is owned by node " + *owner +
                " now: forgotten here, its shared workspace left to that node");
  }
}

} // namespace guestflow::local
