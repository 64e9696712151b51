#pragma once

#include "messages/error.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace guestflow {

/// Limits every decoder enforces before and while parsing untrusted bytes.
struct decode_limits {
  size_t max_bytes = size_t{64} << 20; ///< whole document
  size_t max_depth = 128;              ///< nesting of arrays and objects
};

/// An arbitrary JSON value carried opaquely (vertex outputs, template values, configs).
/// Always holds canonical compact JSON produced by a codec, so it compares and
/// re-encodes byte-stably; an empty `text` means "absent".
struct raw_json {
  std::string text;

  bool empty() const noexcept { return text.empty(); }
  friend bool operator==(const raw_json& a, const raw_json& b) { return a.text == b.text; }
  friend bool operator!=(const raw_json& a, const raw_json& b) { return !(a == b); }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, raw_json& x) {
  return f(x.text);
}

/// Validates `text` as one JSON value within `limits` and returns its canonical form.
result<raw_json> parse_raw_json(std::string_view text, const decode_limits& limits = {});

/// A JSON string literal for `s` (quotes included), escaping as RapidJSON does.
std::string quote_json(std::string_view s);

/// Decodes a whole document into `T`. Total: returns a value or an `ec::bad_request`
/// failure naming the offending field ("nodes[3].data.type: expected string"); never
/// throws, never crashes on any byte string. Specialized per message type in its header.
template<class T>
result<T> decode(std::string_view text, const decode_limits& limits = {});

} // namespace guestflow
