// Service URLs: which guest a proxied connection may enter, and its network namespace.
// The proxying itself is the transport's (http/ingress_proxy.cpp); the rest of control_plane is
// control_plane.cpp.
#include "controlplane/local/network/netns_socket.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "messages/secret.hpp"

#include <chrono>

namespace guestflow::local {

result<ingress_target> control_plane::open_ingress(const std::string& id,
                                                   const std::optional<std::string>& token) {
  {
    std::lock_guard<std::mutex> lock{mu_};
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
  auto i = guests_.find(id);
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
  return ingress_pass{activity_lease{[this, id] {
                        std::lock_guard<std::mutex> lock{mu_};
                        if (auto i = guests_.find(id); i != guests_.end()) {
                          --i->second.busy;
                          i->second.last_activity = clock::now();
                          stamp(i->second.rec);
                        }
                      }},
                      false};
}

} // namespace guestflow::local
