#pragma once

#include "controlplane/client/error_mapping.hpp"
#include "controlplane/client/retry_policy.hpp"
#include "controlplane/client/transport.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/verb.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::cp {

/// One logical request of the wire API.
struct call_spec {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;       ///< prefix + path + query, already encoded
  std::string what;         ///< "GET /v1/sandboxes/{id}" for messages (no query)
  std::string body;         ///< request body (sent when `content_type` is set)
  std::string content_type; ///< empty: no body
  bool idempotent = true;   ///< retries transient failures inside the deadline
  body_kind kind = body_kind::jsend;
  size_t body_cap = 0;          ///< cap on a 2xx body, binding while it is read
  bool cap_is_artifact = false; ///< over the cap → artifact_too_large (else unavailable)
  std::chrono::milliseconds timeout{0};
};

/// Receives a 2xx body as it arrives instead of buffering it: called once with an empty
/// view when the 2xx header is in, then with every piece of body. Returning a failure
/// aborts the call (the connection is closed, never pooled).
using body_sink = std::function<std::optional<failure>(std::string_view)>;

/// One request/response exchange with the control plane, including its retries: acquire a
/// pooled connection or resolve + connect (+ TLS handshake), write, read the header, read
/// the body under its cap (or stream it into a sink), map the outcome, and retry
/// idempotent transient failures with backoff inside the deadline. Every step runs on the
/// call's own strand with `expires_after(remaining)` on the stream; a deadline timer also
/// covers resolve and backoff. Completes exactly once.
///
/// Stale pooled connections: a request on a *reused* connection whose write fails, or whose
/// read ends with EOF or a reset before a single response byte, is sent once more on a
/// fresh connection even when not idempotent. That is the server closing an idle
/// keep-alive connection (the request was not processed); any byte of response rules it out.
class http_call : public std::enable_shared_from_this<http_call> {
public:
  using completion = std::function<void(result<std::string>)>;

  /// Starts the call; `done` runs exactly once on a client thread (or right away on the
  /// calling thread when the client is shut down). A `done` that throws is logged.
  static std::shared_ptr<http_call> start(std::shared_ptr<transport> t, call_spec spec,
                                          completion done, body_sink sink = {});

  /// Ends the call with `why` (unless it already completed). Any thread.
  void abort(failure why);

  http_call(std::shared_ptr<transport> t, call_spec spec, completion done, body_sink sink);

private:
  using tcp = boost::asio::ip::tcp;
  using clock = std::chrono::steady_clock;
  using parser_type = boost::beast::http::response_parser<boost::beast::http::string_body>;

  void begin();
  void attempt();
  void on_resolve(const boost::system::error_code& err, const tcp::resolver::results_type& r);
  void connect_to(std::vector<tcp::endpoint> eps);
  void on_connect(const boost::system::error_code& err);
  void on_handshake(const boost::system::error_code& err);
  void send();
  void on_write(const boost::system::error_code& err);
  void on_header(const boost::system::error_code& err);
  void on_body(const boost::system::error_code& err);
  void read_stream();
  void on_stream(const boost::system::error_code& err);
  void over_cap();
  void attempt_failed(attempt_outcome o);
  void retry_fresh();
  void interrupt(failure why);
  bool stop_if_aborted();
  void finish(result<std::string> r);
  void keep_or_drop_connection();
  void drop_connection();
  std::chrono::milliseconds remaining() const;
  template <class F>
  auto on_strand(F&& f);

  std::shared_ptr<transport> t_;
  call_spec spec_;
  completion done_;
  body_sink sink_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::steady_timer deadline_timer_;
  boost::asio::steady_timer backoff_timer_;
  tcp::resolver resolver_;
  boost::beast::http::request<boost::beast::http::string_body> req_;
  std::unique_ptr<connection> conn_;
  boost::beast::flat_buffer buffer_;
  std::optional<parser_type> parser_;
  retry_policy retry_;
  clock::time_point deadline_;
  uint64_t id_ = 0;
  unsigned status_ = 0;
  std::optional<std::chrono::milliseconds> retry_after_;
  std::optional<failure> aborted_;
  std::optional<failure> last_failure_; ///< of the previous attempt, while retrying
  bool reused_ = false;
  bool skip_pool_ = false;
  bool stale_retry_used_ = false;
  bool reached_server_ = false; ///< this attempt has a connection (pooled or established)
  bool finished_ = false;
};

} // namespace guestflow::cp
