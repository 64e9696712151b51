#include "actors/session_recorder.hpp"

#include "actors/caf_bridge.hpp"

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/mailbox_element.hpp>

namespace guestflow {

run_subscriber_actor::behavior_type
session_recorder(run_subscriber_actor::stateful_pointer<session_recorder_state> self,
                 message_store_actor store, std::string session, run_subscriber_actor caller,
                 bool cancel_on_disconnect) {
  auto& st = self->state;
  st.store = std::move(store);
  st.session = std::move(session);
  st.caller = std::move(caller);
  st.cancel_on_disconnect = cancel_on_disconnect;
  self->monitor(st.caller);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    if (!st.caller || dm.source != st.caller.address()) return;
    st.caller = run_subscriber_actor{};
    if (st.cancel_on_disconnect) self->quit(caf::exit_reason::user_shutdown);
  });
  return {
      // Read-only, and passed on as the message the run sent (its log keeps it): a mutable
      // handler would have had CAF copy every event first.
      [self](const run_event& e) {
        auto& st = self->state;
        if (e.type == run_event::kind::message)
          self->send(st.store, put_atom::value, st.session, e.data());
        auto terminal = e.terminal();
        if (st.caller)
          caf_bridge::enqueue_shared(
              self, caf::actor_cast<caf::strong_actor_ptr>(st.caller),
              self->current_mailbox_element()->copy_content_to_message());
        if (terminal) self->quit();
      },
  };
}

} // namespace guestflow
