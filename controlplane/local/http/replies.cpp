#include "controlplane/local/http/replies.hpp"

#include "messages/http_status.hpp"
#include "messages/jsend.hpp"
#include "messages/json.hpp"

namespace guestflow::local {

unsigned wire_status(ec code) {
  if (code == ec::policy_refused) return 409;
  return http_status(code);
}

reply failure_reply(unsigned status, std::string_view message) {
  if (status < 500) return {status, jsend_fail(message)};
  return {status, jsend_error(message, status)};
}

reply failure_reply(const failure& f) {
  // A full or draining node: the caller may place the guest elsewhere, so the fail data
  // carries the code for clients to tell it from other 429s.
  if (f.code == ec::capacity)
    return {wire_status(f.code), R"({"status":"fail","data":{"code":"capacity","message":)" +
                                     quote_json(f.message) + "}}"};
  return failure_reply(wire_status(f.code), f.message);
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
