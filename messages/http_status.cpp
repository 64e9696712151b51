#include "messages/http_status.hpp"

namespace guestflow {

unsigned http_status(ec code) noexcept {
  switch (code) {
  case ec::bad_request:
    return 400;
  case ec::policy_refused: // the policy gate refused: forbidden, whoever asks
    return 403;
  case ec::not_found:
    return 404;
  case ec::paused:
  case ec::egress_drift:
  case ec::cancelled: // the run was cancelled before it could answer
    return 409;
  case ec::artifact_too_large:
    return 413;
  case ec::capacity:
    return 429;
  case ec::guest_failed:
  case ec::killed: // the guest's command died of a SIGKILL of its own making
    return 502;
  case ec::unavailable:
  case ec::transient:
    return 503;
  case ec::timeout:
    return 504;
  case ec::oom:
    return 507;
  }
  return 500; // a value outside the enum
}

} // namespace guestflow
