#pragma once

#include "messages/error.hpp"

namespace guestflow {

/// The one error → HTTP status table of guestflow (bridge/API.md, "Errors"): the status an
/// answer carrying `code` has on every HTTP surface. A new code must get its row here (the
/// switch has no default, so -Wswitch names the missing one).
///
/// bad_request 400 · policy_refused 403 · not_found 404 · paused, egress_drift, cancelled
/// 409 · artifact_too_large 413 · capacity 429 · guest_failed 502 · unavailable, transient
/// 503 · timeout 504 · oom 507.
unsigned http_status(ec code) noexcept;

} // namespace guestflow
