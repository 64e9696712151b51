#pragma once

#include "controlplane/client/error_mapping.hpp"
#include "controlplane/client/reply_parser.hpp"
#include "controlplane/client/retry_policy.hpp"
#include "controlplane/client/transport.hpp"
#include "messages/shared_bytes.hpp"

#include <boost/asio/basic_waitable_timer.hpp>
#include <boost/asio/ip/basic_resolver.hpp>
#include <boost/asio/ip/tcp.hpp>
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
  size_t path_at = 0;       ///< where the path starts in `target` (after the URL prefix)
  shared_bytes body;        ///< request body (sent when `content_type` is set), never copied
  std::string content_type; ///< empty: no body
  bool idempotent = true;   ///< retries transient failures inside the deadline
  body_kind kind = body_kind::jsend;
  size_t body_cap = 0;          ///< cap on a 2xx body, binding while it is read
  bool cap_is_artifact = false; ///< over the cap → artifact_too_large (else unavailable)
  std::chrono::milliseconds timeout{0};

  /// "GET /v1/sandboxes/{id}" for messages (no prefix, no query): built only when a
  /// message needs it, not for every call.
  std::string what() const;
};

/// The request line and headers of `spec` (its body follows them on the wire), exactly as
/// Beast's serializer would write them.
std::string request_head(const call_spec& spec, std::string_view host, std::string_view accept,
                         std::string_view api_key);

/// Receives a 2xx body as it arrives instead of buffering it: called once with an empty
/// view when the 2xx header is in, then with every piece of body. Returning a failure
/// aborts the call (the connection is closed, never pooled).
using body_sink = std::function<std::optional<failure>(std::string_view)>;

/// One request/response exchange with the control plane, including its retries: acquire a
/// pooled connection or resolve + connect (+ TLS handshake), write, read the header, read
/// the body under its cap (or stream it into a sink), map the outcome, and retry
/// idempotent transient failures with backoff inside the deadline. Completes exactly once.
///
/// Cost per call, because thousands are in flight: every handler runs on the call's lane
/// (one thread at a time: its own, or the scheduler worker it is lent to; no strand); one
/// deadline timer covers the whole call (resolve, connect, TLS, write, read, backoff) and
/// closes the connection when it fires; the request head is written by hand next to the body
/// (no header containers); the reply parser keeps no header fields; a plain connection waits
/// for readability and reads into its lane's buffer (no speculative read before the answer
/// exists, no buffer per connection).
///
/// Stale pooled connections: a request on a *reused* connection whose write fails, or whose
/// read ends with EOF or a reset before a single response byte, is sent once more on a
/// fresh connection even when not idempotent. That is the server closing an idle
/// keep-alive connection (the request was not processed); any byte of response rules it out.
class http_call : public inflight_call, public std::enable_shared_from_this<http_call> {
public:
  using completion = std::function<void(result<std::string>)>;

  /// Starts the call; `done` runs exactly once on a client thread (or right away on the
  /// calling thread when the client is shut down). A `done` that throws is logged.
  static std::shared_ptr<http_call> start(std::shared_ptr<transport> t, call_spec spec,
                                          completion done, body_sink sink = {});

  /// Starts a call of type `Call` (a subclass that completes itself, see `deliver`).
  template<class Call, class... Args>
  static std::shared_ptr<Call> launch(std::shared_ptr<transport> t, call_spec spec,
                                      Args&&... args) {
    auto c = std::make_shared<Call>(std::move(t), std::move(spec), std::forward<Args>(args)...);
    run(c);
    return c;
  }

  /// Ends the call with `why` (unless it already completed). Any thread.
  void abort(failure why) override;

  http_call(std::shared_ptr<transport> t, call_spec spec, body_sink sink);
  virtual ~http_call() = default;

protected:
  /// The outcome, exactly once, on a client thread. For a reply that `take_data` took,
  /// the value is an empty string.
  virtual void deliver(result<std::string> r) = 0;

  /// A 2xx JSend reply in the exact `{"status":"success","data":…}` form: decode `data`
  /// (one parse instead of envelope + data) and keep the value; false sends the reply
  /// through the full envelope check of map_response.
  virtual bool take_data(std::string_view) { return false; }

  const call_spec& spec() const noexcept { return spec_; }

private:
  using tcp = boost::asio::ip::tcp;
  using clock = std::chrono::steady_clock;
  using executor = boost::asio::io_context::executor_type;
  using timer =
      boost::asio::basic_waitable_timer<clock, boost::asio::wait_traits<clock>, executor>;
  using resolver = boost::asio::ip::basic_resolver<tcp, executor>;

  static void run(const std::shared_ptr<http_call>& c);
  void begin() override;
  std::shared_ptr<inflight_call> hold() override { return weak_from_this().lock(); }
  void on_deadline();
  void attempt();
  void on_resolve(const boost::system::error_code& err, const tcp::resolver::results_type& r);
  void connect_to(std::vector<tcp::endpoint> eps);
  void connect_one(const boost::asio::generic::stream_protocol::endpoint& ep);
  void connect_unix(const boost::asio::generic::stream_protocol::endpoint& ep);
  void wait_for_connection(failure busy);
  void take_connection(std::unique_ptr<connection> c);
  void on_connect(const boost::system::error_code& err);
  void on_handshake(const boost::system::error_code& err);
  void send();
  void on_write(const boost::system::error_code& err, uint32_t gen);
  void on_readable(const boost::system::error_code& err, uint32_t gen);
  void wait_readable();
  void read_plain();
  void read_tls();
  void on_tls_data(const boost::system::error_code& err, size_t n, uint32_t gen);
  bool consume(const char* data, size_t n);
  bool on_header();
  void read_failed(boost::system::error_code err);
  void complete_body();
  void over_cap();
  void attempt_failed(attempt_outcome o);
  void retry_fresh();
  void interrupt(failure why);
  bool stop_if_aborted();
  void finish(result<std::string> r);
  void keep_or_drop_connection();
  void drop_connection();

  std::shared_ptr<transport> t_;
  io_lane* lane_;
  call_spec spec_;
  body_sink sink_;
  std::string head_; ///< request line + headers, written by hand
  timer deadline_timer_;
  // Rarely needed parts live behind pointers: every call in flight carries this object.
  std::unique_ptr<timer> backoff_timer_; ///< only once a retry waits
  std::unique_ptr<resolver> resolver_;   ///< only for a host name (not an IP literal)
  std::unique_ptr<connection> conn_;
  std::optional<reply_parser> parser_;
  retry_policy retry_;
  clock::time_point deadline_;
  std::unique_ptr<failure> aborted_;
  std::unique_ptr<failure> last_failure_; ///< of the previous attempt, while retrying
  uint32_t gen_ = 0; ///< attempt number: handlers of an abandoned attempt do nothing
  phase phase_ = phase::resolve;
  bool enrolled_ = false;
  bool header_seen_ = false;
  bool streaming_ = false; ///< a 2xx header arrived and there is a sink: the body goes there
  bool written_ = false;
  bool readable_ = false; ///< the answer became readable before the write completed
  bool reused_ = false;
  bool skip_pool_ = false;
  bool stale_retry_used_ = false;
  bool reached_server_ = false; ///< this attempt has a connection (pooled or established)
  bool waiting_for_connection_ = false; ///< in the lane's connection_waiters
  bool finished_ = false;
};

} // namespace guestflow::cp
