#pragma once

#include "bridge/server/routes.hpp"
#include "bridge/server/service.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace guestflow::bridge {

/// How a run's answer is given: NDJSON events as they happen, or one JSON answer at the end.
enum class run_answer : uint8_t { stream, collect };

/// One request as a route handler sees it: what was asked, and the means to answer. The
/// connection implements it (connection.cpp), so a handler never touches the transport.
/// Every member runs on the connection's strand; an answer of the service, which arrives on
/// an actor thread, comes back onto it through `then`.
class exchange : public std::enable_shared_from_this<exchange> {
public:
  virtual ~exchange() = default;

  /// What the matched route read from the target (`{id}`, `from_seq`).
  virtual const route_params& params() const = 0;
  /// The request body, moved out (call once).
  virtual std::string take_body() = 0;
  /// A request header field's value ("" when absent).
  virtual std::string header(std::string_view name) const = 0;
  /// What a body decoder may accept (the server's body cap).
  virtual decode_limits body_limits() const = 0;

  /// A plain answer.
  virtual void respond(unsigned status, std::string body,
                       std::string_view content_type = "application/json") = 0;
  /// The error answer for `f`: `{"error":…}` with the status of messages/http_status.hpp.
  virtual void refuse(const failure& f) = 0;

  /// Starts a run's answer: spawns the relay that takes the run's events to this
  /// connection and watches for the client going away. Subscribe the returned relay.
  virtual run_subscriber_actor begin_run(run_answer mode) = 0;
  /// The run begun with begin_run was admitted as `id` (the answer starts), or refused.
  virtual void admitted(result<std::string> id) = 0;

  /// Starts an answer of NDJSON lines written as they are produced (a session command's
  /// output) with the streamed runs' machinery (chunked writes, heartbeat blank lines, the
  /// slow-client backlog): spawns the relay that takes the lines to this connection and
  /// watches for the client going away (the relay then quits, which its producer sees).
  /// The head (200) goes out at the relay's `open` or first line; the answer ends after
  /// the last line. `before_last` runs (on the relay's thread) before the last line goes
  /// out: what the work held is given back before its caller can read that it ended.
  virtual line_relay_actor begin_lines(std::function<void()> before_last = {}) = 0;
  /// The work behind begin_lines failed: the error answer when nothing is out yet (the
  /// relay is stopped); else nothing — the relay's last line says it.
  virtual void lines_failed(const failure& f) = 0;

  /// For a run whose caller holds the request open for a plain answer (sandbox,
  /// component): watches for the client going away before the answer is written and then
  /// calls `gone` once, on this exchange's strand (the run's cancel). The answer then ends
  /// the connection (the watch reads the socket).
  virtual void on_disconnect(std::function<void()> gone) = 0;

  /// A service callback that runs `f(exchange&, result<T>)` on this exchange's strand; it
  /// keeps the connection alive until then.
  template<class T, class F>
  reply<T> then(F f) {
    return [self = shared_from_this(), f](result<T> r) {
      self->post([f, r = std::move(r)](exchange& ex) mutable { f(ex, std::move(r)); });
    };
  }

protected:
  /// Runs `f` on the connection's strand; callable from any thread.
  virtual void post(std::function<void(exchange&)> f) = 0;
};

} // namespace guestflow::bridge
