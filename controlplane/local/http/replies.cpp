#include "controlplane/local/http/replies.hpp"

#include "messages/jsend.hpp"
#include "messages/json.hpp"

namespace guestflow::local {

unsigned http_status(ec code) {
  switch (code) {
  case ec::bad_request:
    return 400;
  case ec::not_found:
    return 404;
  case ec::paused:
  case ec::policy_refused:
  case ec::egress_drift:
    return 409;
  case ec::artifact_too_large:
    return 413;
  case ec::unavailable:
  case ec::transient:
  case ec::capacity:
    return 503;
  case ec::timeout:
    return 504;
  default:
    return 500;
  }
}

reply failure_reply(unsigned status, std::string_view message) {
  if (status < 500) return {status, jsend_fail(message)};
  return {status, jsend_error(message, status)};
}

reply failure_reply(const failure& f) {
  return failure_reply(http_status(f.code), f.message);
}

reply success_reply(std::string_view data_json) {
  return {200, jsend_success(data_json)};
}

std::string encode(const noted_view& v) {
  auto json = encode(v.view);
  if (v.note.empty() || json.size() < 2 || json.back() != '}') return json;
  json.pop_back();
  json += ",\"note\":" + quote_json(v.note) + "}";
  return json;
}

} // namespace guestflow::local
