// Service URLs: which guest a proxied connection may enter, and its network namespace.
// The proxying itself is the transport's (http/ingress.cpp); the rest of control_plane is
// control_plane.cpp.
#include "controlplane/local/network/netns_socket.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "messages/secret.hpp"

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

std::optional<activity_lease>
control_plane::ingress_ready(const std::string& id, const std::optional<std::string>& token) {
  std::lock_guard<std::mutex> lock{mu_};
  auto i = guests_.find(id);
  if (i == guests_.end()) return std::nullopt;
  auto& g = i->second;
  if (g.rec.status != sandbox_status::running || g.rec.pooled || !g.rec.ingress_enabled)
    return std::nullopt;
  if (token && !same_secret(*token, g.rec.ingress_secret)) return std::nullopt;
  return lease(g);
}

} // namespace guestflow::local
