#include "controlplane/client/error_mapping.hpp"

#include "common/text.hpp"
#include "messages/jsend.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/status.hpp>
#include <chrono>

namespace guestflow::cp {
namespace {

namespace http = boost::beast::http;

/// At most this much of an unparseable body is quoted in a message.
constexpr size_t quote_limit = 200;

std::string status_text(unsigned status) {
  auto reason = http::obsolete_reason(static_cast<http::status>(status));
  return std::to_string(status) + (reason.empty() ? "" : " " + std::string(reason));
}

/// The server's own words: the envelope message, else fail data, else a body excerpt.
std::string server_message(std::string_view body, const result<jsend>& env) {
  if (env) {
    if (env->message && !env->message->empty()) return *env->message;
    if (!env->data.empty() && env->data.text != "null")
      return env->data.text.substr(0, quote_limit);
    return {};
  }
  std::string out(body.substr(0, quote_limit));
  for (auto& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return out;
}

bool contains_ci(std::string_view hay, std::string_view needle) {
  return lower(hay).find(needle) != std::string::npos;
}

attempt_outcome outcome(ec code, std::string message, bool retryable) {
  return {fail(code, std::move(message)), retryable};
}

} // namespace

attempt_outcome map_response(unsigned status, std::string_view body, body_kind kind,
                             std::string_view what) {
  auto ok = status >= 200 && status < 300;
  if (ok && kind == body_kind::raw) return {std::string(body), false};
  if (status == 204) // No Content: a success without data
    return {std::string("null"), false};
  auto env = decode<jsend>(body);
  if (ok) {
    if (env && env->status == jsend::kind::success)
      return {env->data.empty() ? std::string("null") : env->data.text, false};
    auto msg = server_message(body, env);
    auto kind_name = !env                               ? std::string("no JSend envelope")
                     : env->status == jsend::kind::fail ? std::string("a 'fail' envelope")
                                                        : std::string("an 'error' envelope");
    return outcome(ec::transient,
                   "control plane answered " + std::string(what) + " with " +
                       status_text(status) + " and " + kind_name +
                       (msg.empty() ? "" : ": " + msg),
                   true);
  }
  auto msg = server_message(body, env);
  auto with_status = [&](std::string_view verb) {
    return "control plane " + std::string(verb) + " " + std::string(what) + " with " +
           status_text(status) + (msg.empty() ? "" : ": " + msg);
  };
  if (status == 404)
    return outcome(ec::not_found, msg.empty() ? std::string(what) + ": not found" : msg, false);
  if (status == 409 && contains_ci(msg, "sandbox is paused"))
    return outcome(ec::paused, msg, false);
  if (status == 409 && contains_ci(msg, "image in use"))
    return outcome(ec::policy_refused, msg, false);
  if (status == 400 || status == 409 || status == 413 || status == 422)
    return outcome(ec::bad_request, msg.empty() ? with_status("refused") : msg, false);
  // A control plane over its budget, or draining, refuses a create with 429 and JSend fail
  // `{"code":"capacity"}`: a definite answer (nothing was built), for placement to try
  // another node — not a transient to retry on the same one.
  if (status == 429 && env && env->status == jsend::kind::fail &&
      env->data.text.find(R"("code":"capacity")") != std::string::npos)
    return outcome(ec::capacity, msg.empty() ? with_status("refused") : msg, false);
  if (status == 429 || (status >= 500 && status < 600))
    return outcome(ec::transient, with_status("answered"), true);
  if (status == 401 || status == 403)
    return outcome(ec::unavailable, with_status("refused") + " (check the API key)", false);
  return outcome(ec::unavailable, with_status("answered"), false);
}

std::optional<std::string_view> success_data_of(std::string_view body) {
  constexpr std::string_view head = R"({"status":"success","data":)";
  if (body.size() <= head.size() + 1 || body.substr(0, head.size()) != head ||
      body.back() != '}')
    return std::nullopt;
  return body.substr(head.size(), body.size() - head.size() - 1);
}

attempt_outcome map_transport(phase where, const boost::system::error_code& err,
                              std::string_view origin, std::string_view what) {
  namespace net = boost::asio;
  auto detail = err.message();
  bool timed_out = err == boost::beast::error::timeout || err == net::error::timed_out;
  if (timed_out)
    return outcome(ec::transient,
                   std::string(what) + ": control plane at " + std::string(origin) +
                       " timed out while " +
                       (where == phase::resolve     ? "resolving"
                        : where == phase::connect   ? "connecting"
                        : where == phase::handshake ? "in the TLS handshake"
                        : where == phase::write     ? "sending the request"
                                                    : "reading the response"),
                   true);
  switch (where) {
  case phase::resolve:
  case phase::connect:
    return outcome(ec::unavailable,
                   "control plane at " + std::string(origin) + " unreachable: " + detail, true);
  case phase::handshake:
    if (err.category() == net::error::get_ssl_category() ||
        err == net::ssl::error::stream_truncated)
      return outcome(ec::unavailable,
                     "TLS handshake with control plane at " + std::string(origin) +
                         " failed: " + detail,
                     false);
    return outcome(ec::unavailable,
                   "control plane at " + std::string(origin) + " unreachable: " + detail, true);
  case phase::write:
  case phase::read:
    break;
  }
  return outcome(ec::transient,
                 std::string(what) + ": connection to control plane at " + std::string(origin) +
                     " failed while " +
                     (where == phase::write ? "sending the request" : "reading the response") +
                     ": " + detail,
                 true);
}

failure deadline_failure(std::string_view what, std::chrono::milliseconds timeout) {
  return fail(ec::transient, std::string(what) + ": no answer within the deadline of " +
                                 std::to_string(timeout.count()) + " ms");
}

} // namespace guestflow::cp
