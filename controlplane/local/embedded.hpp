#pragma once

#include "controlplane/local/serve.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace guestflow::local {

/// The local control plane running inside another process (the CLI's "embedded" mode):
/// same server, same records, on its own threads, stopped by stop() instead of a signal.
/// Guests are not its children and outlive it, exactly as with `guestflow control-plane`.
class embedded_control_plane {
public:
  /// Starts serving on `opts.listen` and returns once it accepts connections. While
  /// another process holds `opts.state_dir`, waits (polling) up to `wait_for_lock`, so
  /// several CLI invocations on one state dir run one after another instead of failing;
  /// `stop_waiting`, asked between polls, ends the wait early (a user's Ctrl-C).
  static result<std::unique_ptr<embedded_control_plane>>
  start(serve_options opts, std::chrono::milliseconds wait_for_lock,
        const std::function<bool()>& stop_waiting = {});

  virtual ~embedded_control_plane() = default;

  /// "http://127.0.0.1:PORT".
  virtual const std::string& url() const noexcept = 0;

  /// "unix:///PATH" when started with serve_options::unix_socket, else empty.
  virtual const std::string& unix_url() const noexcept = 0;

  /// Stops serving (running guests keep running). Idempotent; also done by the destructor.
  virtual void stop() = 0;
};

} // namespace guestflow::local
