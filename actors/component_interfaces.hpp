#pragma once

// WIP holding file (see the brief): appended to actors/actors.hpp at the end, then deleted.

#include "actors/actors.hpp"
#include "messages/component.hpp"

namespace guestflow {

// -- component surface: reusable guests (registry, lifecycle) -----------------------------

using acquire_atom = caf::atom_constant<caf::atom("acquire")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using ensure_atom = caf::atom_constant<caf::atom("ensure")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;

/// Brings a guest back to `running` before anything touches it: paused → resume → poll
/// GET until running, within a deadline. Concurrent asks for one guest share the work.
using lifecycle_actor = caf::typed_actor<
  /// Ensures guest `id` is running; replies its view once it is (transient past the
  /// deadline, unavailable for a guest in error/failed/destroying/destroyed).
  caf::replies_to<ensure_atom, std::string>::with<sandbox_view>,
  /// Internal: look at guest `id` again (poll timer).
  caf::reacts_to<poll_atom, std::string>>;

/// The reuse registry. The control plane's names are the registry (`gf-c-<hash>`, see
/// names::reusable): a guest is found by listing and matching its name, so reuse survives
/// a restart and keeps no state of its own. One FIFO queue per name serializes the runs of
/// this runtime on that guest; never two creates for one name.
using guest_registry_actor = caf::typed_actor<
  /// Acquires the reusable guest `req.name` for the sender (waiting behind earlier holders
  /// of that name): adopts the live guest of that name — egress checked against
  /// `req.egress` (egress_drift if it differs; the guest is left alone), then resumed if
  /// paused — or creates it (a create refused because another process won the race
  /// adopts the winner). Replies the guest, running, held until `release`.
  caf::replies_to<acquire_atom, sandbox_create_request>::with<reusable_guest>,
  /// The sender is done with the guest of this name: the next waiter gets it. A holder
  /// that dies releases implicitly.
  caf::reacts_to<release_atom, std::string>,
  /// Deletes `gf-c-` guests idle longer than the given seconds (idle = now −
  /// max(created_at, last_resumed_at, paused_at)) that no run of this runtime holds;
  /// replies how many were deleted.
  caf::replies_to<sweep_atom, uint32_t>::with<uint64_t>>;

} // namespace guestflow
