#pragma once

#include "messages/error.hpp"
#include "messages/fleet.hpp"
#include "messages/image.hpp"
#include "messages/sandbox.hpp"
#include "messages/shared_bytes.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

/// The control-plane wire API (DESIGN.md, CreateOS v1 subset) as typed asynchronous calls.
/// One client per endpoint; it owns its Asio threads and a keep-alive connection pool.
/// Every call takes a deadline and completes exactly once, on a client thread, through its
/// callback — the actor layer turns that into a message, so no actor blocks on I/O.
namespace guestflow::cp {

using clock = std::chrono::steady_clock;
using millis = std::chrono::milliseconds;

/// Which kind of control plane an endpoint is: the policy gate applies CreateOS's known
/// capabilities (`createos_capabilities()`, endpoint_selection.hpp) or asks the local one.
enum class provider : uint8_t { local, createos };

/// Where the control plane is and how to reach it.
struct endpoint {
  std::string base_url;   ///< "http://127.0.0.1:PORT" or "https://api.sb.createos.sh"
  std::string api_key;    ///< sent as X-Api-Key when non-empty
  bool verify_tls = true; ///< peer verification + SNI; plain http only for loopback hosts
  provider kind = provider::local; ///< createos: capabilities_of answers the known facts
  std::string ca_pem; ///< extra trusted CA certificates (PEM), added to the system store
};

struct client_config {
  size_t io_threads = 1; ///< lanes: one thread, io_context and share of the pool each
  /// Pooled keep-alive connections kept open (each closes after pool_idle_timeout). As
  /// high as the calls a runtime has in flight at once: below that, every burst closes
  /// the surplus and reconnects on the next phase (thousands of executions in flight
  /// step through create, upload, exec, delete together).
  size_t max_idle_per_endpoint = 16384;
  millis default_timeout{30'000};
  millis retry_initial{100}; ///< backoff for idempotent calls on `transient`
  millis retry_max{5'000};
  size_t max_response_bytes = size_t{64} << 20; ///< body cap for buffered JSON replies
  millis pool_idle_timeout{30'000}; ///< idle pooled connections older than this are closed
  /// A pooled connection idle for less than this is reused without first peeking at it
  /// (a system call per request) for a close the server did not announce: servers close
  /// idle keep-alive connections after seconds, and a request a closed connection drops
  /// unanswered is resent once on a fresh one anyway. 0: peek before every reuse.
  millis pool_peek_after{250};
  /// Lets an idle worker of the actor scheduler run the I/O lanes instead of their own
  /// threads (common/lendable_loop.hpp): answers reach actors without waking another
  /// thread. The lanes' threads run them until then, and again after the scheduler ends.
  bool lend_io_to_scheduler = true;
};

template<class T>
using callback = std::function<void(result<T>)>;

/// Stream of a `?stream=true` exec: `on_line` for every NDJSON line as it arrives
/// (assembled across chunk boundaries; heartbeats and the exit_code line included), then
/// `on_done` exactly once with the exit code from the `{"exit_code":N}` line, or a failure:
/// transient "stream ended without exit code" (body or connection ended first), transient
/// "cancelled" (stream_handle::cancel), transient on the deadline (an overall backstop that
/// heartbeats do not extend), unavailable for a line over 16 MiB or one that is not a
/// stream line. Both run on a client thread, never concurrently for one stream.
struct exec_stream_callbacks {
  std::function<void(exec_stream_line)> on_line;
  callback<int32_t> on_done;
};

/// Cancels a running streamed exec by closing its connection (the server then kills the
/// command). Safe to call from any thread, any number of times, also after completion.
class stream_handle {
public:
  virtual ~stream_handle() = default;
  virtual void cancel() = 0;
};

/// Error mapping (as the seed plugin does): a 2xx whose envelope is not success, 429, 5xx,
/// connect/read timeouts, a connection broken mid-exchange → transient; 409 "sandbox is
/// paused" → paused; 409 "image in use: …" → policy_refused; 404 → not_found;
/// 400/409/413/422 → bad_request with the server's message; 401/403 and any other non-2xx →
/// unavailable with the status in the message; a control plane that cannot be reached
/// (resolve/connect refused) → unavailable "control plane at URL unreachable: …"; a failed TLS
/// handshake (certificate) → unavailable. Idempotent calls (GET, DELETE, pause, resume, PUT
/// egress, PUT files) retry transient and unreachable with jittered exponential backoff inside
/// their deadline; create and exec never retry — except that a request on a *pooled* connection
/// that fails while writing, or whose read ends (EOF/reset) before a single response byte, is
/// sent once more on a fresh connection: that is the server having closed an idle keep-alive
/// connection, not an answer; and that a `unix://` control plane whose accept queue is
/// full (a burst of new connections; nothing was sent) is tried again with backoff, as
/// transient, inside the deadline.
///
/// Every call completes exactly once, on a client thread; a `timeout` ≤ 0 means
/// `client_config::default_timeout`. The deadline covers resolve + connect + TLS + write +
/// read, and all retries. Public methods are thread-safe. A user callback that throws is
/// logged and otherwise ignored.
class client {
public:
  /// Fails with bad_request for a malformed URL or config, policy_refused for plain http to
  /// a non-loopback host, unavailable when TLS cannot be set up (bad `ca_pem`).
  static result<std::shared_ptr<client>> make(endpoint ep, client_config cfg = {});

  virtual ~client() = default;

  const endpoint& where() const noexcept { return ep_; }

  virtual void shapes(millis timeout, callback<shape_list> cb) = 0;
  virtual void who(millis timeout, callback<whoami> cb) = 0;
  /// GET /v1/capabilities on a local control plane; CreateOS has no such endpoint, so for
  /// `provider::createos` this answers `createos_capabilities()` without a request.
  virtual void capabilities_of(millis timeout, callback<capabilities> cb) = 0;
  virtual void create(const sandbox_create_request& req, millis timeout,
                      callback<sandbox_created> cb) = 0;
  virtual void get(const std::string& id, millis timeout, callback<sandbox_view> cb) = 0;
  /// `status` empty = all; `limit` 0 = server default.
  virtual void list(const std::string& status, uint32_t limit, uint32_t offset, millis timeout,
                    callback<sandbox_list> cb) = 0;
  /// `path` must be absolute (bad_request otherwise, nothing sent); it is URL-encoded.
  virtual void put_file(const std::string& id, const std::string& path, shared_bytes body,
                        millis timeout, callback<bool> cb) = 0;
  /// The cap binds during the transfer: a body longer than `max_bytes` aborts the read at
  /// the cap (never buffers more) and fails with artifact_too_large.
  virtual void get_file(const std::string& id, const std::string& path, size_t max_bytes,
                        millis timeout, callback<std::string> cb) = 0;
  virtual void exec(const std::string& id, const exec_request& req, millis timeout,
                    callback<exec_result> cb) = 0;
  /// Never null. Never retried (see above).
  virtual std::shared_ptr<stream_handle> exec_stream(const std::string& id,
                                                     const exec_request& req, millis timeout,
                                                     exec_stream_callbacks cbs) = 0;
  virtual void get_egress(const std::string& id, millis timeout, callback<egress_body> cb) = 0;
  virtual void put_egress(const std::string& id, const egress_policy& egress, millis timeout,
                          callback<egress_body> cb) = 0;
  virtual void pause(const std::string& id, millis timeout, callback<sandbox_view> cb) = 0;
  virtual void resume(const std::string& id, millis timeout, callback<sandbox_view> cb) = 0;
  virtual void remove(const std::string& id, millis timeout, callback<sandbox_deleted> cb) = 0;
  /// `DELETE /v1/sandboxes/{id}?if_idle_for=S` (a local control plane): refused (409 →
  /// bad_request "sandbox in use: …") while an exec/file call is in progress on the guest or
  /// one ended less than S seconds ago, checked atomically with the delete. CreateOS knows no
  /// such guard: there it is the plain delete. Default (a test double): unavailable.
  virtual void remove_if_idle(const std::string& id, uint32_t idle_seconds, millis timeout,
                              callback<sandbox_deleted> cb);
  /// `POST /v1/sandboxes/{id}/stop` (a local control plane's persistent guest: processes
  /// gone, memory freed, workspace kept; the next exec or file call starts it again).
  /// Idempotent. CreateOS has no such guests; default (a test double): unavailable.
  virtual void stop(const std::string& id, millis timeout, callback<sandbox_view> cb);

  /// Guest images of a local control plane (`guestflow image`): `GET /v1/images`, `POST
  /// /v1/images` (never retried; an import may take minutes: give it the time) and `DELETE
  /// /v1/images/{name}` (policy_refused "image in use: …" while a guest uses it). CreateOS
  /// has its own templates: for `provider::createos` these fail with `unavailable` without
  /// a request. A client that does not implement them (a test double) fails the same way, at
  /// once on the calling thread.
  virtual void images(millis timeout, callback<image_list> cb);
  virtual void add_image(const image_add_request& req, millis timeout,
                         callback<image_added> cb);
  virtual void remove_image(const std::string& name, millis timeout,
                            callback<image_removed> cb);

  /// `GET /v1/capacity` of a local control plane (its budget, committed memory, guests,
  /// draining, ready): what fleet placement reads. CreateOS has none: unavailable, as for a
  /// client that does not implement it (at once, on the calling thread).
  virtual void capacity(millis timeout, callback<node_capacity> cb);

  /// The control plane that holds guest `id` (its base URL and key): this client's own
  /// endpoint; a fleet's node that holds it (looked up as calls by id are). What `serve`
  /// forwards a guest's service URL to (bridge/API.md, "Service URLs").
  virtual void endpoint_of(const std::string& id, millis timeout, callback<endpoint> cb);

  /// The client this one wraps (observed, …), or nullptr: how fleet_snapshot_of finds a
  /// fleet client under its wrappers.
  virtual const client* wrapped() const noexcept { return nullptr; }

  /// Stops the I/O threads; pending calls complete with `unavailable` (on a client thread,
  /// before shutdown returns unless it is called from a callback). Calls made after
  /// shutdown complete at once with `unavailable` on the calling thread. Idempotent; the
  /// destructor calls it.
  virtual void shutdown() = 0;

protected:
  explicit client(endpoint ep)
      : ep_(std::move(ep)) {}
  endpoint ep_;
};

} // namespace guestflow::cp
