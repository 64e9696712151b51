#pragma once

#include "controlplane/local/serve.hpp"
#include "messages/error.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace guestflow::local {

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
