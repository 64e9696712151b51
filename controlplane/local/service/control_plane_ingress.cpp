// Service URLs: which guest a proxied connection may enter, and its network namespace.
// The proxying itself is the transport's (http/ingress_proxy.cpp); the rest of control_plane is
// control_plane.cpp.
#include "controlplane/local/network/netns_socket.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "messages/secret.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::local {

result<ingress_target> control_plane::open_ingress(const std::string& asked,
                                                   const std::optional<std::string>& token) {
  std::string id = find_ingress_alias(asked);
  {
    std::lock_guard<std::mutex> lock{mu_};
    id = ingress_id(id);
    auto g = find(id);
    if (!g) return g.error();
    const auto& rec = (*g)->rec;
    if (!is_live(rec.status) || rec.pooled)
      return fail(ec::not_found, "no sandbox with id '" + id + "'");
    if (!rec.ingress_enabled)
      return fail(ec::not_found, "sandbox " + id +
                                     " has no service URLs: create it with "
                                     "\"ingress_enabled\": true");
    // Before anything wakes: a wrong token starts no stopped guest.
    if (token && !same_secret(*token, rec.ingress_secret)) {
      ingress_target refused;
      refused.authorized = false;
      return refused;
    }
  }
  if (auto woken = wake(id); !woken) return woken.error();
  ingress_target out;
  guest_runtime rt;
  {
    std::lock_guard<std::mutex> lock{mu_};
    auto g = find_usable(id);
    if (!g) return g.error();
    rt = (*g)->rec.runtime;
    out.lease = lease(**g);
  }
  if (rt.isolation == guest_isolation::gvisor) {
    out.relay = [this, rt](uint16_t port) { return start_relay(rt, port); };
    return out;
  }
  auto ns = open_netns_of(rt.init_pid);
  if (!ns) return ns.error();
  // Opened first, checked after: the namespace is the guest's unless its init died and
  // its pid was reused in between, which alive() (pid and start time) rules out.
  if (!backend_.alive(rt)) return fail(ec::guest_failed, "the sandbox's init is not running");
  out.netns = std::move(*ns);
  return out;
}

namespace {

/// A gVisor guest's relay (its loopback is the Sentry's own, out of reach of a socket made
/// in its netns): connects to 127.0.0.1:PORT inside the guest, writes one byte once
/// connected (exits first when nothing listens), then copies the connection to its stdout
/// and its stdin to the connection, exiting when either ends. Its stdio may come non-blocking
/// (gVisor's import of the host socket): EAGAIN waits in select. python3: what every guest
/// of the built-in image has.
constexpr const char* relay_program = R"py(import os, select, socket, sys, threading
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
def put(d):
    while d:
        try:
            d = d[os.write(1, d):]
        except BlockingIOError:
            select.select([], [1], [], 0.05)
def get():
    while True:
        try:
            return os.read(0, 65536)
        except BlockingIOError:
            select.select([0], [], [], 0.05)
def up():
    try:
        while True:
            d = get()
            if not d:
                break
            s.sendall(d)
    except OSError:
        pass
    os._exit(0)
put(b"+")
threading.Thread(target=up, daemon=True).start()
try:
    while True:
        d = s.recv(65536)
        if not d:
            break
        put(d)
except OSError:
    pass
os._exit(0)
)py";

} // namespace

result<ingress_relay> control_plane::start_relay(const guest_runtime& rt, uint16_t port) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return fail(ec::unavailable, std::string{"socketpair: "} + std::strerror(errno));
  unique_fd ours{sv[0]}, theirs{sv[1]};
  exec_request req{"python3", {"-c", relay_program, std::to_string(port)}};
  auto started = backend_.start_exec(rt, req, {}, theirs.get());
  if (!started) return started.error();
  theirs.reset(); // the relay's only: its exit is the socket's EOF
  ingress_relay out;
  out.sock = std::move(ours);
  out.end = activity_lease{
      [this, id = rt.id, p = std::make_shared<exec_process>(std::move(*started))] {
        // Called once the proxy closed its end: the relay sees EOF and exits at once; one that
        // does not within 5 s is killed. What it said on stderr (python3 missing, a traceback)
        // goes to the log.
        pollfd pfd{p->pidfd, POLLIN, 0};
        if (::poll(&pfd, 1, 5000) <= 0) backend_.kill_exec(*p);
        char said[2048];
        auto n = ::read(p->stderr_fd, said, sizeof said);
        if (n > 0 && cfg_.warn)
          cfg_.warn("sandbox " + id + ": service URL relay: " + std::string(said, size_t(n)));
        backend_.reap(*p);
      }};
  return out;
}

namespace {

/// Last used now: the record's text stamp formatted only when its second changed (a
/// proxied request per few microseconds would format it each time).
void stamp(guest_record& rec) {
  auto now = std::chrono::duration_cast<std::chrono::seconds>(
                 std::chrono::system_clock::now().time_since_epoch())
                 .count();
  if (rec.last_used_unix == now && rec.last_used_at) return;
  rec.last_used_unix = now;
  rec.last_used_at = now_rfc3339();
}

} // namespace

std::optional<ingress_pass>
control_plane::ingress_ready(const std::string& id, const std::optional<std::string>& token) {
  std::lock_guard<std::mutex> lock{mu_};
  auto i = guests_.find(ingress_id(id));
  if (i == guests_.end()) return std::nullopt;
  auto& g = i->second;
  if (g.rec.status != sandbox_status::running || g.rec.pooled || !g.rec.ingress_enabled)
    return std::nullopt;
  if (token && !same_secret(*token, g.rec.ingress_secret)) return std::nullopt;
  // A persistent guest's release writes its record (its idle time outlives this process):
  // the transport ends that lease on a worker, as exec and files do.
  if (g.rec.persistent) return ingress_pass{lease(g), true};
  // Any other guest's is the lease's bookkeeping without the write: cheap enough to end on
  // the io thread, which saves a worker's wake-up per proxied request. Auto-pause sees the
  // same thing as for an exec: busy while the request is in flight, idle from its end.
  ++g.busy;
  stamp(g.rec);
  return ingress_pass{activity_lease{[this, id = g.rec.id] {
                        std::lock_guard<std::mutex> lock{mu_};
                        if (auto i = guests_.find(id); i != guests_.end()) {
                          --i->second.busy;
                          i->second.last_activity = clock::now();
                          stamp(i->second.rec);
                        }
                      }},
                      false};
}

namespace {

/// Beside a shared guest's workspace (guest_backend.hpp): its ingress secret on the first
/// line, then every id it had, one a line. Owner-only: the secret opens its URLs.
constexpr const char* kept_ingress_file = shared_ingress_file;

} // namespace

std::vector<std::string> control_plane::adopt_kept_ingress(const std::filesystem::path& dir,
                                                           std::string& secret) {
  std::ifstream in{dir / kept_ingress_file};
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) return {};
  secret = line;
  std::vector<std::string> ids;
  while (std::getline(in, line))
    if (!line.empty()) ids.push_back(line);
  return ids;
}

result<bool> control_plane::keep_ingress(const std::filesystem::path& dir,
                                         const std::string& secret,
                                         const std::vector<std::string>& former,
                                         const std::string& id) {
  std::string text = secret + "\n";
  for (const auto& f : former)
    if (f != id) text += f + "\n";
  text += id + "\n";
  const auto path = dir / kept_ingress_file;
  const auto tmp = dir / (std::string{kept_ingress_file} + ".tmp");
  unique_fd fd{::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)};
  if (fd.get() < 0 || ::write(fd.get(), text.data(), text.size()) != ssize_t(text.size()) ||
      ::rename(tmp.c_str(), path.c_str()) != 0)
    return fail(ec::unavailable, "cannot write " + path.string() + ": " + std::strerror(errno));
  for (const auto& f : former)
    if (f != id) ingress_aliases_[f] = id;
  return true;
}

std::string control_plane::find_ingress_alias(const std::string& id) {
  std::vector<std::pair<std::string, std::filesystem::path>> shared; // id, its directory
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (cfg_.workspace_root.empty() || ingress_id(id) != id ||
        (guests_.count(id) && is_live(guests_.at(id).rec.status)))
      return id;
    for (const auto& [gid, g] : guests_)
      if (is_live(g.rec.status) && g.rec.persistent && g.rec.ingress_enabled &&
          !g.rec.runtime.workspace.empty() &&
          g.rec.runtime.workspace.parent_path().parent_path() == cfg_.workspace_root)
        shared.emplace_back(gid, g.rec.runtime.workspace.parent_path());
  }
  for (const auto& [gid, dir] : shared) {
    std::string secret;
    auto ids = adopt_kept_ingress(dir, secret);
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) continue;
    std::lock_guard<std::mutex> lock{mu_};
    ingress_aliases_[id] = gid;
    return gid;
  }
  return id;
}

const std::string& control_plane::ingress_id(const std::string& id) const {
  if (guests_.count(id) && is_live(guests_.at(id).rec.status)) return id;
  auto a = ingress_aliases_.find(id);
  return a == ingress_aliases_.end() ? id : a->second;
}

} // namespace guestflow::local
