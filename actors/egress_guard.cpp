#include "actors/egress_guard.hpp"

namespace guestflow::egress_guard {

std::optional<failure> check(const std::string& name, const std::string& id,
                             const egress_policy& promised, const egress_policy& reported) {
  if (promised == reported) return std::nullopt;
  return fail(ec::egress_drift,
              "reusable guest " + name + " (" + id + ") was created with egress '" +
                  fingerprint(promised) + "' but now reports '" + fingerprint(reported) +
                  "'; refused, not reused, and left in place for inspection (delete it with "
                  "`guestflow reap --reusable`)");
}

} // namespace guestflow::egress_guard
