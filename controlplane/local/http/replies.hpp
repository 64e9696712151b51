#pragma once

#include "controlplane/local/service/sandbox_service.hpp"
#include "messages/error.hpp"

#include <string>

/// Domain answers → HTTP status + JSend body, the same way for every endpoint: 4xx carry
/// `{"status":"fail","data":{"message":…}}`, 5xx `{"status":"error","message":…,"code":…}`.
namespace guestflow::local {

struct reply {
  unsigned status = 200;
  std::string body; ///< JSON
};

/// bad_request 400 · not_found 404 · paused/policy_refused(conflict)/egress_drift 409 ·
/// artifact_too_large 413 · unavailable/transient/capacity 503 · timeout 504 · others 500.
unsigned http_status(ec code);

reply failure_reply(const failure& f);
reply failure_reply(unsigned status, std::string_view message);
reply success_reply(std::string_view data_json);

/// `encode(view)` plus `"note":…` when the guest has one (the OOM kill, a failed destroy).
std::string encode(const noted_view& v);

} // namespace guestflow::local
