#pragma once

#include "bridge/server/metrics.hpp"
#include "bridge/server/port_token.hpp"
#include "bridge/server/routes.hpp"
#include "bridge/server/service.hpp"
#include "common/net_address.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace guestflow::bridge {

struct session_gateway; // bridge/server/surfaces/sessions.hpp

struct server_options {
  std::string token;                             ///< empty: no authentication
  uint64_t max_body_bytes = uint64_t{64} << 20;  ///< GUESTFLOW_MAX_BODY_BYTES
  std::chrono::seconds client_timeout{30};       ///< GUESTFLOW_CLIENT_TIMEOUT_SECONDS
  size_t stream_backlog_bytes = size_t{8} << 20; ///< a stream's unsent bytes before a drop
  std::chrono::seconds heartbeat{15};            ///< GUESTFLOW_STREAM_HEARTBEAT_SECONDS
  unsigned io_threads = 1;                       ///< GUESTFLOW_SERVE_IO_THREADS
  const call_latency* cp_latency = nullptr;      ///< rendered in /metrics when set
  // -- agent sessions (bridge/server/surfaces/sessions.hpp) --
  const session_gateway* sessions = nullptr; ///< serves /v1/sessions when set
  // -- service URLs (bridge/API.md, "Service URLs") --
  std::chrono::seconds port_url_ttl{3600}; ///< GUESTFLOW_PORT_URL_TTL_SECONDS: default and most
  std::string public_url; ///< GUESTFLOW_PUBLIC_URL: their base ("": http:// + the Host asked)
};

/// What every connection and every route handler shares.
struct server_context {
  service& svc;
  metrics& stats;
  server_options opts;
  const route_table& routes;
  /// Signs the service URLs this server hands out and checks them when they are used.
  port_signer ports;
  // -- shutdown (server::begin_shutdown) --
  std::atomic<bool> stopping{false};    ///< no new request is read
  std::atomic<int64_t> answers_owed{0}; ///< connections whose run's answer is not yet out
};

/// The transport layer: accepts on its own I/O threads and serves bridge/API.md with one
/// Beast session per connection, each request handed to the route table's handler. Every
/// domain call is asynchronous (the service answers on an actor thread; the session hops
/// back onto its strand), so a thousand open streams cost sockets and buffers, not threads.
/// Asio and Beast stay in the .cpp files: this header is what apps/ includes.
class server {
public:
  /// Binds `listen` (port 0 picks one) and serves `routes` (default: every route of
  /// bridge/API.md); throws a std::runtime_error (a boost::system::system_error saying why)
  /// when it cannot.
  server(service& svc, metrics& stats, server_options opts, const net_address& listen);
  server(service& svc, metrics& stats, server_options opts, const net_address& listen,
         const route_table& routes);
  ~server();

  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// The bound address (the real port).
  net_address local_address() const;

  /// Starts accepting on `io_threads` threads.
  void start();

  /// The first step of a graceful stop: closes the listening socket and reads no further
  /// request; connections owing a run's answer keep writing it (the service's shutdown
  /// ends the runs).
  void begin_shutdown();
  /// Connections whose run's answer (a stream's terminal event, a collected answer, a
  /// sandbox or component result) is not written yet.
  int64_t answers_owed() const noexcept;

  /// Stops accepting, closes every connection and joins the threads. Idempotent.
  void stop();

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace guestflow::bridge
