#pragma once

#include "common/net_address.hpp"
#include "controlplane/local/http/http_options.hpp"
#include "controlplane/local/service/control_plane.hpp"
#include "messages/error.hpp"

#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::local {

/// The longest Unix socket path the kernel takes (sun_path holds 108 bytes with the NUL).
constexpr size_t max_unix_socket_path = 107;

/// `--fleet …`: this node registers in etcd under a lease and keeps its capacity record
/// current (fleet/node_registrar.hpp); without `etcd`, no fleet.
struct fleet_options {
  std::string etcd;             ///< "etcd://HOST:PORT[,HOST:PORT…]"; empty: no fleet
  std::string advertise;        ///< the URL runtimes reach this node at; empty: url()
  std::chrono::seconds ttl{10}; ///< the lease's TTL (`--fleet-ttl-seconds`)
};

struct serve_options {
  std::string listen = "127.0.0.1:0"; ///< HOST:PORT, [V6]:PORT
  /// Also serve on this Unix socket (mode 0600, removed at stop): a local client's path
  /// without the TCP stack (`unix:///PATH` as its control-plane URL).
  std::optional<std::filesystem::path> unix_socket;
  std::filesystem::path state_dir; ///< records, lock, guest workspaces
  http_options http;               ///< includes the API key
  control_plane_config domain;
  unsigned workers = 4; ///< threads for blocking backend / SQLite calls
  /// Bench/test-only: serve simulated_control_plane with this latency, no guests.
  std::optional<uint32_t> simulate_latency_ms;
  /// Bench/test-only, with simulate_latency_ms: every simulated exec prints this file's
  /// content on stdout (e.g. a canned guest-runner frame stream, so whole-flow runs end
  /// with `complete`). Read once at start; unreadable is a refused configuration.
  std::optional<std::filesystem::path> simulate_exec_stdout;
  /// Test-only: the nft binary the backend uses (a missing one proves the fail-closed path).
  std::optional<std::string> nft_path;
  fleet_options fleet;
};

/// `HOST:PORT` (`[V6]:PORT`, `localhost` = 127.0.0.1) as an address; bad_request naming
/// `--listen` otherwise. Shared by every command that listens.
result<net_address> parse_listen(const std::string& listen);

/// A started control plane: state dir locked, port bound, records reconciled with the
/// host. run() serves on the calling thread until stop() (callable from any thread);
/// the destructor stops it. Running guests are never stopped: they outlive the server.
class server_instance {
public:
  /// Locks, binds, reconciles. Failures: bad_request / policy_refused for a refused
  /// configuration (bad --listen, non-loopback without a key, no state dir),
  /// unavailable otherwise (state dir held by another control plane — the message starts
  /// with "another control plane" —, port taken, backend or records unusable).
  static result<std::unique_ptr<server_instance>> start(const serve_options& opts);
  ~server_instance();
  server_instance(const server_instance&) = delete;
  server_instance& operator=(const server_instance&) = delete;

  /// "http://127.0.0.1:PORT" (IPv6 hosts in brackets).
  const std::string& url() const noexcept;
  /// "unix:///PATH" with serve_options::unix_socket, else empty.
  const std::string& unix_url() const noexcept;
  uint16_t port() const noexcept;

  /// Stops on SIGINT/SIGTERM too (the `guestflow control-plane` process).
  void stop_on_signals();

  /// Serves until stop(); then finishes pending worker jobs (kills, reaps) and returns.
  void run();

  /// Stops accepting, kills running exec commands, ends run(). Idempotent, thread-safe.
  void stop();

private:
  struct impl;
  explicit server_instance(std::unique_ptr<impl> i);
  static void arm_prune(impl& m);
  std::unique_ptr<impl> impl_;
};

/// `guestflow control-plane`: starts a server_instance, prints `listening on URL` on `out`
/// (flushed: it is the readiness signal; with a Unix socket a second line `listening on
/// unix:///PATH` follows at once), serves until SIGTERM/SIGINT. Returns the exit
/// code: 0 after a clean stop, 2 for a refused configuration, 1 for other failures.
int serve(const serve_options& opts, std::ostream& out, std::ostream& err);

} // namespace guestflow::local
