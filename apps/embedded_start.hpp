#pragma once

#include "controlplane/local/embedded.hpp"
#include "messages/error.hpp"

#include <functional>
#include <memory>
#include <string>

namespace guestflow::cli {

class signal_watch;

/// What a command polls while it waits for another guestflow using the state dir `dir`:
/// a wait the user notices (a second) is one the user is told about, once; true once
/// SIGINT or SIGTERM has arrived, which ends the wait. `watch` must outlive it.
std::function<bool()> waiting_notice(const signal_watch& watch, std::string dir);

/// The control plane embedded on `opts.state_dir`, listening on loopback (any port) and,
/// for this process's own client, on a Unix socket in the state dir when the path fits in
/// sun_path. Another guestflow holding the state dir goes first: this one waits its turn
/// until `stop_waiting` ends the wait with `cancelled`. Any other failure is unavailable.
result<std::unique_ptr<local::embedded_control_plane>>
start_embedded(local::serve_options opts, const std::function<bool()>& stop_waiting,
               const failure& cancelled);

} // namespace guestflow::cli
