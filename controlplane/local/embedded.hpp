#pragma once

#include "controlplane/local/serve.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace guestflow::local {

/// Which warm pool (service/warm_pool.hpp) a command's embedded control plane keeps.
enum class warm_pool_default {
  off,  ///< none, whatever the environment says (`guestflow reap`: it deletes, never builds)
  none, ///< GUESTFLOW_WARM_POOL when set, else none: a one-shot command (code, run,
        ///< component) would build the pool at start and delete it at exit, only adding cost
  host, ///< GUESTFLOW_WARM_POOL when set, else a pool for each guest the host's runs ask
        ///< for (host_guests): a long-lived host (`guestflow serve`, what Langflow talks to)
};

/// The guests a long-lived host's runs ask for, each of which gets a default pool.
struct host_guests {
  /// Its sandbox runs use the runtime's default guest (s-1vcpu-256mb, debian:12, deny-all;
  /// policy::default_local_guest): default_host_warm_pool.
  bool sandbox = true;
  /// Its whole-flow executor's guest (the executor's shape, image and egress):
  /// default_executor_pool. Its image may be one the store lacks: then the pool is dropped
  /// at start with a warning (its runs would fail the same way), never a refusal.
  std::optional<pool_key> executor;
};

/// The embedded control plane's pool: `env_value` is GUESTFLOW_WARM_POOL (absent or blank:
/// unset), read with --warm-pool's syntax; bad_request naming the variable when malformed.
/// Unset with `host`: the pools of `guests`, within MemAvailable (a pool for the sandbox
/// guest and one for the executor's; one pool when both are the same guest).
result<warm_pool_spec> embedded_warm_pool(const std::optional<std::string>& env_value,
                                          warm_pool_default fallback,
                                          const host_guests& guests = {});

/// The local control plane running inside another process (the CLI's "embedded" mode):
/// same server, same records, on its own threads, stopped by stop() instead of a signal.
/// Guests are not its children and outlive it, exactly as with `guestflow control-plane`.
class embedded_control_plane {
public:
  /// Starts serving on `opts.listen` and returns once it accepts connections.
  static result<std::unique_ptr<embedded_control_plane>> start(const serve_options& opts);

  /// The failure of a start() while another process holds the state dir: the caller may
  /// run after it (try again) rather than beside it.
  static bool held_elsewhere(const failure& f);

  virtual ~embedded_control_plane() = default;

  /// "http://127.0.0.1:PORT".
  virtual const std::string& url() const noexcept = 0;

  /// "unix:///PATH" when started with serve_options::unix_socket, else empty.
  virtual const std::string& unix_url() const noexcept = 0;

  /// Stops serving (running guests keep running). Idempotent; also done by the destructor.
  virtual void stop() = 0;
};

} // namespace guestflow::local
