#include "actors/lifecycle.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

namespace guestflow {
namespace {

using self_ptr = lifecycle_actor::stateful_pointer<lifecycle_state>;

void answer(self_ptr self, const std::string& id, const result<sandbox_view>& r) {
  auto i = self->state.guests.find(id);
  if (i == self->state.guests.end()) return;
  auto waiters = std::move(i->second.waiters);
  self->state.guests.erase(i);
  for (auto& rp : waiters) {
    if (r)
      rp.deliver(*r);
    else
      rp.deliver(make_error(r.error().code, r.error().message));
  }
}

void look(self_ptr self, const std::string& id);

void poll_later(self_ptr self, const std::string& id) {
  auto& g = self->state.guests[id];
  if (self->clock().now() >= g.deadline)
    return answer(self, id,
                  fail(ec::transient, "guest " + id + " did not become running within " +
                                          std::to_string(self->state.opts.deadline.count()) +
                                          " ms (last status: " + g.last_status + ")"));
  self->delayed_send(self, self->state.opts.poll_interval, poll_atom::value, id);
}

void resume(self_ptr self, const std::string& id) {
  auto& st = self->state;
  st.guests[id].in_flight = true;
  st.guests[id].resumed = true;
  self->request(st.cp, st.opts.call_timeout, resume_atom::value, id)
      .then(
          [self, id](sandbox_view& v) {
            self->state.guests[id].in_flight = false;
            if (v.status == sandbox_status::running) return answer(self, id, v);
            self->state.guests[id].last_status = std::string{to_string(v.status)};
            poll_later(self, id);
          },
          [self, id](caf::error& err) {
            self->state.guests[id].in_flight = false;
            auto f = to_failure(err);
            // 409 "sandbox is pausing; only a paused sandbox can become running" and other
            // in-between states answer bad_request: look again after a while.
            if (f.code == ec::bad_request || f.code == ec::transient || f.code == ec::paused)
              return poll_later(self, id);
            answer(self, id, f);
          });
}

void look(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.guests.find(id);
  if (i == st.guests.end() || i->second.in_flight) return;
  i->second.in_flight = true;
  self->request(st.cp, st.opts.call_timeout, get_atom::value, id)
      .then(
          [self, id](sandbox_view& v) {
            auto& g = self->state.guests[id];
            g.in_flight = false;
            g.last_status = std::string{to_string(v.status)};
            switch (v.status) {
            case sandbox_status::running:
              return answer(self, id, v);
            case sandbox_status::paused:
              // One resume per round; if it comes back paused again (auto-pause raced the
              // resume), the next GET resumes once more.
              if (!g.resumed) return resume(self, id);
              g.resumed = false;
              return poll_later(self, id);
            case sandbox_status::creating:
            case sandbox_status::pausing:
            case sandbox_status::resuming:
              return poll_later(self, id);
            default:
              return answer(
                  self, id,
                  fail(ec::unavailable, "guest " + id + " is " + g.last_status +
                                            " and cannot be brought back to running"));
            }
          },
          [self, id](caf::error& err) {
            self->state.guests[id].in_flight = false;
            auto f = to_failure(err);
            if (f.code == ec::transient) return poll_later(self, id);
            answer(self, id, f);
          });
}

} // namespace

lifecycle_actor::behavior_type
lifecycle(lifecycle_actor::stateful_pointer<lifecycle_state> self, controlplane_actor cp,
          lifecycle_options opts) {
  self->state.cp = std::move(cp);
  self->state.opts = opts;
  return {
      [self](ensure_atom, std::string& id) {
        auto rp = self->make_response_promise<caf::typed_response_promise<sandbox_view>>();
        auto& st = self->state;
        auto [i, fresh] = st.guests.try_emplace(id);
        i->second.waiters.push_back(rp);
        if (fresh) {
          i->second.deadline = self->clock().now() + st.opts.deadline;
          look(self, id);
        }
        return rp;
      },
      [self](poll_atom, std::string& id) { look(self, id); },
  };
}

} // namespace guestflow
