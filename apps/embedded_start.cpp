#include "apps/embedded_start.hpp"

#include "apps/signal_watch.hpp"
#include "apps/wait_turn.hpp"

#include <chrono>
#include <iostream>

namespace guestflow::cli {

std::function<bool()> waiting_notice(const signal_watch& watch, std::string dir) {
  return [&watch, dir = std::move(dir), since = std::chrono::steady_clock::now(),
          told = false]() mutable {
    if (!told && std::chrono::steady_clock::now() - since > std::chrono::seconds{1}) {
      told = true;
      std::cerr << "guestflow: waiting for another guestflow using " << dir << '\n';
    }
    return watch.received() != 0;
  };
}

result<std::unique_ptr<local::embedded_control_plane>>
start_embedded(local::serve_options opts, const std::function<bool()>& stop_waiting,
               const failure& cancelled) {
  opts.listen = "127.0.0.1:0";
  // This process's own client goes through a Unix socket in the state dir (0600, held
  // under the state dir's lock): no TCP stack per call. A path too long for sun_path
  // keeps to TCP.
  auto sock = opts.state_dir / "control-plane.sock";
  if (sock.string().size() <= local::max_unix_socket_path) opts.unix_socket = sock;
  // Another guestflow on this state dir: run after it rather than beside it.
  auto started = wait_turn<std::unique_ptr<local::embedded_control_plane>>(
      [&]() -> std::optional<result<std::unique_ptr<local::embedded_control_plane>>> {
        auto r = local::embedded_control_plane::start(opts);
        if (!r && local::embedded_control_plane::held_elsewhere(r.error())) return std::nullopt;
        return r;
      },
      stop_waiting, cancelled);
  if (!started && started.error().code != ec::cancelled)
    return fail(ec::unavailable,
                "the embedded control plane cannot start: " + started.error().message);
  return started;
}

} // namespace guestflow::cli
