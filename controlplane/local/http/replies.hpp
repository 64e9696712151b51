#pragma once

#include "controlplane/local/service/sandbox_service.hpp"
#include "messages/error.hpp"

#include <string>

/// Domain answers → HTTP status + JSend body, the same way for every endpoint: 4xx carry
/// `{"status":"fail","data":{"message":…}}`, 5xx `{"status":"error","message":…,"code":…}`.
namespace guestflow::local {

struct reply {
  unsigned status = 200;
  std::string body;                              ///< JSON, unless content_type says otherwise
  const char* content_type = "application/json"; ///< a string literal (static storage)
};

/// The status of an answer carrying `code`: guestflow's one table (messages/http_status.hpp),
/// except where the CreateOS wire API this control plane speaks gives a status another
/// meaning. There 403 refuses the caller's credentials (the client reports "check the API
/// key"), so `policy_refused` (an image in use) stays 409 Conflict, which the client maps
/// back to policy_refused by its message; every other code has the shared table's status.
unsigned wire_status(ec code);

/// A `capacity` failure is 429 with `{"status":"fail","data":{"code":"capacity","message":…}}`.
reply failure_reply(const failure& f);
reply failure_reply(unsigned status, std::string_view message);
reply success_reply(std::string_view data_json);

/// `encode(view)` plus `"note":…` when the guest has one (the OOM kill, a failed destroy).
std::string encode(const noted_view& v);

} // namespace guestflow::local
