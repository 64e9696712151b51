#pragma once
// CreateOS on loopback, as far as serve's service URLs need it and no further than its
// documentation says (SOURCES.md names each page): every request is forwarded to a real
// local control plane (real guests, the same wire API), and the answers carry CreateOS's
// documented ingress fields instead of the local control plane's own (`ingress_secret`).
#include "tests/integration/client/loopback_server.hpp"

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace guestflow::testing {

class createos_stand_in {
public:
  /// Listens on 127.0.0.1:0 in front of the local control plane on `control_plane_port`;
  /// `domain` is CreateOS's public ingress domain ("" = it knows none).
  createos_stand_in(uint16_t control_plane_port, std::string domain);

  std::string url() const { return server_.url(); }
  /// Every request as received (method, path, body), in order.
  std::vector<gft::http_request> requests() const { return server_.requests(); }
  /// From now on CreateOS knows this public domain ("" = none: no template is sent).
  void set_domain(std::string domain);

  /// The template CreateOS gives guest `id` on `domain`: `https://<ulid>-<port>.<domain>`,
  /// the ulid being the id without its `sb-`/`sb_` prefix.
  static std::string template_for(const std::string& id, const std::string& domain);

private:
  void forward(gft::exchange& ex);
  /// Adds the ingress fields after every `{"id":"…"` of a JSend answer: the template
  /// (create answer, view) and `ingress_enabled` (views only).
  std::string with_ingress(std::string body, bool view);

  uint16_t cp_port_;
  mutable std::mutex mu_;
  std::string domain_;
  std::set<std::string> ingress_on_; ///< guests created with ingress_enabled: true
  gft::loopback_server server_;
};

} // namespace guestflow::testing
