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
    // A record from before creates refused it (or edited): never a misleading 502.
    if (rec.runtime.isolation == guest_isolation::gvisor)
      return fail(ec::unavailable, gvisor_ingress_refusal);
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
  auto ns = open_netns_of(rt.init_pid);
  if (!ns) return ns.error();
  // Opened first, checked after: the namespace is the guest's unless its init died and
  // its pid was reused in between, which alive() (pid and start time) rules out.
  if (!backend_.alive(rt)) return fail(ec::guest_failed, "the sandbox's init is not running");
  out.netns = std::move(*ns);
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
