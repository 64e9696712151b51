#include "actors/guest_registry.hpp"

#include "actors/egress_guard.hpp"
#include "actors/guest_names.hpp"
#include "actors/reaper.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <ctime>

namespace guestflow {
namespace {

using self_ptr = guest_registry_actor::stateful_pointer<guest_registry_state>;
using slot = guest_registry_state::slot;

bool gone(sandbox_status s) {
  return s == sandbox_status::destroyed || s == sandbox_status::destroying ||
         s == sandbox_status::failed;
}

void start(self_ptr self, const std::string& name);

/// The head of `name`'s queue is done (granted and released, failed, or abandoned): the
/// next run in line gets its turn.
void next(self_ptr self, const std::string& name) {
  auto& sl = self->state.slots[name];
  if (!sl.queue.empty()) sl.queue.pop_front();
  sl.active = false;
  sl.granted = false;
  if (!sl.queue.empty()) start(self, name);
}

void refuse(self_ptr self, const std::string& name, const failure& f) {
  auto& sl = self->state.slots[name];
  auto& head = sl.queue.front();
  if (!head.abandoned) head.rp.deliver(make_error(f.code, f.message));
  next(self, name);
}

void grant(self_ptr self, const std::string& name, reusable_guest g) {
  auto& sl = self->state.slots[name];
  sl.known_id = g.id;
  auto& head = sl.queue.front();
  if (head.abandoned) return next(self, name); // its run is gone: nobody would ever release it
  sl.granted = true;
  head.rp.deliver(std::move(g));
}

/// An existing guest of this name: its isolation and egress first (a guest weaker than
/// the run asks for, or one whose egress drifted, is neither resumed nor touched), then
/// running.
void adopt(self_ptr self, const std::string& name, sandbox_view v) {
  auto& st = self->state;
  st.slots[name].known_id = v.id;
  // A run that asks for more than namespaces never gets the guest a namespaces run (or an
  // older control plane, whose views name no kind) left under the same name.
  const auto& want = st.slots[name].queue.front().req.isolation;
  if (want && *want != "namespaces" && *want != v.isolation)
    return refuse(self, name,
                  fail(ec::policy_refused,
                       "reusable guest " + name + " (" + v.id + ") is a " +
                           (v.isolation.empty() ? std::string{"namespaces"} : v.isolation) +
                           " guest and this run asks for " + *want +
                           "; delete it with `guestflow reap --reusable`"));
  if (v.status == sandbox_status::error)
    return refuse(self, name,
                  fail(ec::unavailable, "reusable guest " + name + " (" + v.id +
                                            ") is in state error; delete it with "
                                            "`guestflow reap --reusable`"));
  self->request(st.cp, st.opts.call_timeout, egress_atom::value, v.id)
      .then(
          [self, name, v](egress_body& reported) {
            auto& head = self->state.slots[name].queue.front();
            if (auto drift = egress_guard::check(name, v.id, head.req.egress, reported.egress))
              return refuse(self, name, *drift);
            if (v.status == sandbox_status::running)
              return grant(self, name, reusable_guest{v.id, name, false, false});
            // Persistent and stopped (or on its way): the run's first call starts it from
            // its kept workspace (the control plane wakes it on use).
            if (v.status == sandbox_status::stopped || v.status == sandbox_status::stopping ||
                v.status == sandbox_status::starting)
              return grant(self, name, reusable_guest{v.id, name, false, true});
            self->request(self->state.lifecycle, self->state.opts.call_timeout * 2,
                          ensure_atom::value, v.id)
                .then(
                    [self, name, v](sandbox_view& now) {
                      grant(self, name,
                            reusable_guest{now.id, name, false,
                                           v.status != sandbox_status::creating});
                    },
                    [self, name](caf::error& err) { refuse(self, name, to_failure(err)); });
          },
          [self, name](caf::error& err) { refuse(self, name, to_failure(err)); });
}

/// Lists the guests and adopts the live one named `name`; when there is none, creates it
/// — unless this lookup follows a refused create, whose failure then stands.
void find(self_ptr self, const std::string& name, std::optional<failure> create_failed);

void create(self_ptr self, const std::string& name) {
  auto& st = self->state;
  auto req = st.slots[name].queue.front().req;
  self->request(st.cp, st.opts.create_timeout, create_atom::value, req)
      .then(
          [self, name](sandbox_created& c) {
            auto& head = self->state.slots[name].queue.front();
            self->state.slots[name].known_id = c.id;
            if (auto drift = egress_guard::check(name, c.id, head.req.egress, c.egress))
              return refuse(self, name, *drift);
            grant(self, name, reusable_guest{c.id, name, true, false});
          },
          [self, name](caf::error& err) {
            // Most likely another process created the name first (409 "name … is taken"):
            // whatever the control plane said, a live guest under the name is the winner.
            find(self, name, to_failure(err));
          });
}

void find(self_ptr self, const std::string& name, std::optional<failure> create_failed) {
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout, list_atom::value, std::string{})
      .then(
          [self, name, create_failed](sandbox_list& all) {
            for (auto& v : all.data)
              if (v.name == name && !gone(v.status)) return adopt(self, name, std::move(v));
            if (create_failed) return refuse(self, name, *create_failed);
            create(self, name);
          },
          [self, name, create_failed](caf::error& err) {
            refuse(self, name, create_failed ? *create_failed : to_failure(err));
          });
}

void start(self_ptr self, const std::string& name) {
  auto& sl = self->state.slots[name];
  sl.active = true;
  sl.granted = false;
  if (sl.known_id.empty()) return find(self, name, std::nullopt);
  // The id seen last time is only a hint: GET it, and fall back to a lookup by name.
  self->request(self->state.cp, self->state.opts.call_timeout, get_atom::value, sl.known_id)
      .then(
          [self, name](sandbox_view& v) {
            if (v.name == name && !gone(v.status)) return adopt(self, name, std::move(v));
            self->state.slots[name].known_id.clear();
            find(self, name, std::nullopt);
          },
          [self, name](caf::error&) {
            self->state.slots[name].known_id.clear();
            find(self, name, std::nullopt);
          });
}

void sweep(self_ptr self, uint32_t idle_s, caf::typed_response_promise<uint64_t> rp) {
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout, list_atom::value, std::string{})
      .then(
          [self, idle_s, rp](sandbox_list& all) mutable {
            auto now = static_cast<int64_t>(std::time(nullptr));
            std::vector<std::string> doomed;
            for (auto& v : all.data) {
              if (!names::is_reusable(v.name) || gone(v.status)) continue;
              if (auto i = self->state.slots.find(v.name);
                  i != self->state.slots.end() && i->second.active)
                continue; // a run of this runtime holds or is about to hold it
              // A call in progress (this runtime's or another process's): in use.
              if (v.calls_in_progress > 0) continue;
              auto idle = idle_seconds(v, now);
              if (idle && *idle > static_cast<int64_t>(idle_s)) doomed.push_back(v.id);
            }
            if (doomed.empty()) {
              rp.deliver(uint64_t{0});
              return;
            }
            struct tally {
              size_t left;
              uint64_t deleted = 0;
              std::string errors;
            };
            // Guarded on the control plane (if_idle_for): a call that began since the list
            // keeps its guest.
            auto t = std::make_shared<tally>(tally{doomed.size(), 0, {}});
            auto done = [t, rp]() mutable {
              if (--t->left > 0) return;
              if (t->errors.empty())
                rp.deliver(t->deleted);
              else
                rp.deliver(make_error(ec::unavailable, "deleted " + std::to_string(t->deleted) +
                                                           "; could not delete:" + t->errors));
            };
            for (auto& id : doomed)
              self->request(self->state.cp, self->state.opts.call_timeout, delete_atom::value,
                            id, idle_s)
                  .then(
                      [t, done](sandbox_deleted&) mutable {
                        ++t->deleted;
                        done();
                      },
                      [t, done, id](caf::error& err) mutable {
                        auto f = to_failure(err);
                        if (f.code == ec::not_found)
                          ++t->deleted; // gone already: what the sweep wanted
                        else if (f.message.find("sandbox in use") != std::string::npos) {
                          // used since the list: kept, not an error
                        } else
                          t->errors += " " + id + " (" + f.message + ")";
                        done();
                      });
          },
          [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

} // namespace

std::optional<int64_t> idle_seconds(const sandbox_view& v, int64_t now_s) {
  std::optional<int64_t> last;
  auto take = [&](const std::optional<std::string>& ts) {
    if (!ts) return;
    if (auto t = parse_rfc3339(*ts); t && (!last || *t > *last)) last = t;
  };
  take(v.created_at);
  take(v.last_resumed_at);
  take(v.paused_at);
  take(v.stopped_at);
  take(v.last_used_at);
  if (!last) return std::nullopt;
  return now_s - *last;
}

guest_registry_actor::behavior_type
guest_registry(guest_registry_actor::stateful_pointer<guest_registry_state> self,
               controlplane_actor cp, lifecycle_actor lifecycle, guest_registry_options opts) {
  self->state.cp = std::move(cp);
  self->state.lifecycle = std::move(lifecycle);
  self->state.opts = opts;
  self->set_down_handler([self](caf::down_msg& dm) {
    std::vector<std::string> release;
    for (auto& [name, sl] : self->state.slots) {
      if (sl.queue.empty()) continue;
      auto& head = sl.queue.front();
      if (head.who == dm.source) {
        if (sl.granted)
          release.push_back(name);
        else
          head.abandoned = true;
      }
      // Waiters behind the head that died just leave the line.
      for (auto i = sl.queue.begin() + 1; i != sl.queue.end();)
        i = i->who == dm.source ? sl.queue.erase(i) : i + 1;
    }
    for (auto& name : release)
      next(self, name);
  });
  return {
      [self](acquire_atom,
             sandbox_create_request& req) -> caf::typed_response_promise<reusable_guest> {
        auto sender = self->current_sender();
        auto rp = self->make_response_promise<caf::typed_response_promise<reusable_guest>>();
        if (!req.name || !names::is_reusable(*req.name)) {
          rp.deliver(make_error(ec::bad_request,
                                "acquire needs a reusable guest name (gf-c-…), got '" +
                                    req.name.value_or("") + "'"));
          return rp;
        }
        auto name = *req.name;
        guest_registry_state::waiter w{std::move(req), rp, {}, false};
        if (sender) {
          w.who = caf::actor_cast<caf::actor_addr>(sender);
          self->monitor(sender);
        }
        auto& sl = self->state.slots[name];
        sl.queue.push_back(std::move(w));
        if (!sl.active) start(self, name);
        return rp;
      },
      [self](release_atom, std::string& name) {
        auto i = self->state.slots.find(name);
        if (i == self->state.slots.end() || !i->second.granted || i->second.queue.empty())
          return;
        auto sender = self->current_sender();
        if (!sender || i->second.queue.front().who != caf::actor_cast<caf::actor_addr>(sender))
          return; // only the holder releases
        next(self, name);
      },
      [self](sweep_atom, uint32_t idle_s) {
        auto rp = self->make_response_promise<caf::typed_response_promise<uint64_t>>();
        sweep(self, idle_s, rp);
        return rp;
      },
  };
}

} // namespace guestflow
