#pragma once

#include "messages/error.hpp"
#include "messages/json.hpp"

#include <boost/system/error_code.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

/// The one place that turns what the control plane (or the network) did into the
/// `messages/` error vocabulary, as the seed plugin does (client.hpp has the table).
/// Plain functions, no I/O: unit-tested with a table of statuses and envelopes.
namespace guestflow::cp {

/// The outcome of one attempt after mapping: a value or a failure, and whether trying
/// again (idempotent calls only, inside the deadline) could change it.
struct attempt_outcome {
  result<std::string> value;
  bool retryable = false;
};

/// How a 2xx body is read: a JSend envelope (value = canonical `data` JSON) or raw bytes
/// (GET files; value = the body).
enum class body_kind : uint8_t { jsend, raw };

/// Maps a complete response. `what` names the call ("GET /v1/shapes") in messages.
/// - 2xx: jsend → success envelope's data, any other envelope (or none) → transient;
///   raw → the body.
/// - 404 → not_found; 409 "sandbox is paused" → paused; 409 "image in use" →
///   policy_refused; 400/409/413/422 → bad_request with
///   the server's message; 429/5xx → transient (retryable); 401/403/others → unavailable
///   with the status in the message.
attempt_outcome map_response(unsigned status, std::string_view body, body_kind kind,
                             std::string_view what);

/// The `data` of a body in the exact form `{"status":"success","data":<data>}` (how the
/// local control plane writes a success), found without parsing; nullopt for any other form.
/// Not validated: a caller that decodes it whole (which validates it as exactly one JSON
/// value, hence the envelope too) may skip map_response's envelope parse; any decode
/// failure must go through map_response, which judges the body as before.
std::optional<std::string_view> success_data_of(std::string_view body);

/// Where in the exchange a transport error happened.
enum class phase : uint8_t { resolve, connect, handshake, write, read };

/// Maps a transport error. Resolve/connect failures → unavailable "control plane at URL
/// unreachable: …" but retryable (the final failure after the deadline stays unavailable);
/// a TLS handshake failure (certificate verification) → unavailable, not retryable;
/// timeouts and broken connections while writing/reading → transient, retryable.
attempt_outcome map_transport(phase where, const boost::system::error_code& err,
                              std::string_view origin, std::string_view what);

/// The failure of a call whose deadline passed before any other outcome.
failure deadline_failure(std::string_view what, std::chrono::milliseconds timeout);

/// Decodes a success envelope's `data` into `T`. A reply that does not fit the wire API is
/// the control plane's fault, not the caller's: unavailable, not bad_request.
template<class T>
result<T> decode_reply(const std::string& data, std::string_view what) {
  auto r = decode<T>(data);
  if (!r)
    return fail(ec::unavailable, "control plane sent an unexpected reply to " +
                                     std::string(what) + ": " + r.error().message);
  return r;
}

} // namespace guestflow::cp
