#pragma once

#include "messages/json.hpp"

#include <optional>
#include <string>

namespace guestflow {

/// The JSend envelope every control-plane body travels in:
/// `{"status":"success","data":…}` · `{"status":"fail","data":…}` (4xx validation) ·
/// `{"status":"error","message":…,"code":…}`.
struct jsend {
  enum class kind : uint8_t { success, fail, error };
  kind status = kind::success;
  raw_json data;                      ///< success / fail payload (canonical JSON)
  std::optional<std::string> message; ///< error message, or fail's data.message if present
  std::optional<int64_t> code;        ///< error code if present
  friend bool operator==(const jsend& a, const jsend& b) {
    return a.status == b.status && a.data == b.data && a.message == b.message &&
           a.code == b.code;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, jsend& x) {
  return f(x.status, x.data, x.message, x.code);
}

template<>
result<jsend> decode<jsend>(std::string_view, const decode_limits&);
std::string encode(const jsend& x);

/// `{"status":"success","data":<data_json>}` — `data_json` must already be valid JSON.
std::string jsend_success(std::string_view data_json);
/// `{"status":"fail","data":{"message":<message>}}` for a 4xx validation failure.
std::string jsend_fail(std::string_view message);
/// `{"status":"error","message":<message>,"code":<code>}`.
std::string jsend_error(std::string_view message, int64_t code);

} // namespace guestflow
