#pragma once

#include "actors/actors.hpp"

namespace guestflow {

struct output_relay_state {
  static inline const char* name = "output_relay";
  int out_fd = -1;
  int err_fd = -1;
  bool broken = false; ///< a write failed (a closed pipe): later output is dropped
};

/// Writes stdout chunks to `out_fd` and stderr chunks to `err_fd`, in arrival order, as
/// the guest prints them. Spawn it detached: a terminal or pipe that is slow to read
/// blocks this actor's own thread, never a scheduler worker.
output_relay_actor::behavior_type
output_relay(output_relay_actor::stateful_pointer<output_relay_state> self, int out_fd,
             int err_fd);

} // namespace guestflow
