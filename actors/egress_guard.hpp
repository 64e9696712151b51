#pragma once

#include "messages/egress.hpp"
#include "messages/error.hpp"

#include <optional>
#include <string>

/// The egress guard of reusable guests: a guest whose egress drifted after
/// creation is refused outright rather than reused. The network policy is part of a
/// reusable guest's name (names::reusable), so the name *promises* a policy; a guest that
/// reports anything else was changed behind our back.
namespace guestflow::egress_guard {

/// Nothing when `reported` is what the name promised; otherwise `egress_drift` naming the
/// guest, both policies, and that the guest is left in place (it is evidence) for
/// `guestflow reap --reusable`.
std::optional<failure> check(const std::string& name, const std::string& id,
                             const egress_policy& promised, const egress_policy& reported);

} // namespace guestflow::egress_guard
