#pragma once

#include "actors/executor_settings.hpp"
#include "actors/guest_assets.hpp"
#include "actors/run_inputs.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"

#include <string>
#include <vector>

namespace guestflow {

/// Turns an admitted whole-flow run into the execution that runs it in a fresh guest:
/// shape, rootfs and egress from the executor settings; one upload, `/workspace/.run-bundle`,
/// holding spec.json (the graph payload, normalized inputs, requested outputs, forwarded
/// runtime options, the pip fallback and the runtime state: session, user, context, tweaks,
/// history), variables.json when the run has variables (its secrets, never in spec.json)
/// and the runner's files, which
/// guest/unpack_run.py (`python3 -c`) unlinks, then writes under `/tmp/run/` before it runs the
/// runner; that command under `timeout --kill-after=5 N` with N = the caller's timeout
/// (refused above the executor's limit) or the limit; streamed exec; PYTHONUNBUFFERED=1 so
/// frames leave the guest before a kill; auto-pause as the backstop for a guest this
/// process fails to delete. A build without guest/runner.py or guest/unpack_run.py
/// embedded is `unavailable`; a requested output that names no
/// vertex is `bad_request` listing the flow's output vertices. The executor is the
/// caller's, else the settings'. Nothing here talks to a control plane.
result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets);

/// The same with the bundle's shared part made once (`flow_bundle_head(assets)`), as the
/// coordinator does: a run then copies only its own spec.json, not the runner's files.
result<execution_spec> make_flow_spec(const run_request& req, const normalized_inputs& in,
                                      const executor_settings& s, std::string guest_name,
                                      const std::vector<guest_asset>& assets,
                                      const shared_bytes& bundle_head);

/// What every flow run's bundle begins with: the embedded runner's files, each as
/// "<size> <name>\n" and its bytes; with `gzipped`, as the build gzipped them where it could
/// (for a control plane across a wire: a quarter of the bytes, paid with the guest's gunzip).
shared_bytes flow_bundle_head(const std::vector<guest_asset>& assets, bool gzipped = true);

/// Whether runs sent to `ep` carry the runner's files gzipped: not for guestflow's own
/// control plane on this host (a unix socket or a loopback address, not a fleet), where the
/// bytes never cross a wire and the guest's gunzip (0.6 ms of a pooled run's CPU,
/// bench/README.md) costs more than serve and the control plane moving 86 KB more.
bool gzip_bundle_for(const cp::endpoint& ep);

} // namespace guestflow
