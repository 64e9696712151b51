#include "actors/caf_bridge.hpp"

#include <caf/execution_unit.hpp>
#include <caf/message_id.hpp>

namespace guestflow::caf_bridge {

void enqueue_shared(caf::local_actor* self, const caf::strong_actor_ptr& to,
                    const caf::message& msg) {
  if (to)
    to->enqueue(caf::strong_actor_ptr{self->ctrl()}, caf::make_message_id(), msg,
                self->context());
}

} // namespace guestflow::caf_bridge
