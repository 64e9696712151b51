#include "actors/session_manager.hpp"

#include "messages/type_ids.hpp"

#include <caf/send.hpp>

namespace guestflow {

namespace {

using self_ptr = session_manager_actor::stateful_pointer<session_manager_state>;
using info_promise = caf::typed_response_promise<session_info>;
using steady = std::chrono::steady_clock;

session_info info_of(const session_pool::slot& s, bool reused) {
  session_info x;
  x.session_id = s.name;
  x.user_id = s.req.user_id;
  x.thread_id = s.req.thread_id;
  x.warm = s.st == session_pool::state::warm;
  x.reused = reused;
  x.guest_id = s.guest_id;
  x.image = s.req.image;
  x.allow_network = s.req.allow_network;
  return x;
}

void acquire(self_ptr self, session_request req, info_promise rp);

/// The create or delete of `name` ended: the acquires parked behind it ask again.
void wake(self_ptr self, const std::string& name) {
  auto i = self->state.waiting.find(name);
  if (i == self->state.waiting.end()) return;
  auto parked = std::move(i->second);
  self->state.waiting.erase(i);
  for (auto& [req, rp] : parked)
    acquire(self, std::move(req), rp);
}

/// Deletes a deleting slot's guest; `then` runs once the pool forgot it. A failed delete is
/// the reaper's to retry: the guest is never left behind.
template<class F>
void delete_guest(self_ptr self, const session_pool::slot& s, F then) {
  auto& st = self->state;
  auto name = s.name;
  auto done = [self, name, then](bool deleted) mutable {
    auto& st = self->state;
    if (deleted)
      caf::anon_send(st.reaper, released_atom::value, name);
    else
      caf::anon_send(st.reaper, reap_atom::value, name);
    st.pool.deleted(name);
    then();
    wake(self, name);
  };
  self->request(st.cp, st.opts.call_timeout, delete_atom::value, s.guest_id)
      .then([done](sandbox_deleted&) mutable { done(true); },
            [done](caf::error& e) mutable { done(to_failure(e).code == ec::not_found); });
}

/// Schedules the next idle check at the pool's next expiry.
void schedule_expiry(self_ptr self) {
  auto next = self->state.pool.next_expiry();
  if (!next) return;
  auto wait = std::chrono::ceil<std::chrono::milliseconds>(*next - steady::now());
  if (wait.count() < 0) wait = std::chrono::milliseconds{0};
  self->delayed_send(self, wait + std::chrono::milliseconds{5}, tick_atom::value);
}

void create(self_ptr self, const std::string& name, session_request req, info_promise rp) {
  auto& st = self->state;
  auto s = st.opts.settings;
  s.allow_network = req.allow_network;
  if (!req.image.empty()) s.rootfs = req.image;
  auto where = policy::place(s, st.opts.provider, st.opts.catalog);
  if (!where) {
    st.pool.create_failed(name);
    rp.deliver(make_error(where.error().code, where.error().message));
    return wake(self, name);
  }
  sandbox_create_request create;
  create.shape = where->chosen.id;
  create.rootfs = where->rootfs;
  create.name = name;
  create.egress = where->egress;
  // The reaper knows the name before the guest can exist, and monitors this actor: if it
  // dies, or the server drains at shutdown, every session guest is deleted.
  self->send(st.reaper, track_atom::value, name);
  self->request(st.cp, st.opts.call_timeout, create_atom::value, std::move(create))
      .then(
          [self, name, rp](sandbox_created& c) mutable {
            auto& st = self->state;
            caf::anon_send(st.reaper, created_atom::value, name, c.id);
            st.pool.created(name, c.id);
            if (auto slot = st.pool.find(name)) rp.deliver(info_of(*slot, false));
            wake(self, name);
          },
          [self, name, rp](caf::error& e) mutable {
            auto& st = self->state;
            caf::anon_send(st.reaper, refused_atom::value, name);
            st.pool.create_failed(name);
            rp.deliver(std::move(e));
            wake(self, name);
          });
}

void acquire(self_ptr self, session_request req, info_promise rp) {
  auto& st = self->state;
  auto name = session_guest_name(st.opts.owner, req.user_id, req.thread_id);
  auto d = st.pool.acquire(name, req, steady::now());
  using kind = session_pool::decision::kind;
  switch (d.what) {
  case kind::ready:
    rp.deliver(info_of(*st.pool.find(name), true));
    return;
  case kind::wait:
    st.waiting[name].emplace_back(std::move(req), rp);
    return;
  case kind::refuse:
    rp.deliver(make_error(d.why.code, d.why.message));
    return;
  case kind::create:
    break;
  }
  if (!d.evict) return create(self, name, std::move(req), rp);
  // Room first, then the new guest: the cap is what the host is sized for.
  auto victim = *st.pool.find(*d.evict);
  delete_guest(self, victim,
               [self, name, req, rp]() mutable { create(self, name, std::move(req), rp); });
}

/// The active slot of session `id` (a command or file call needs one).
result<const session_pool::slot*> active(self_ptr self, const std::string& id) {
  if (self->state.stopping) return fail(ec::unavailable, "server shutting down");
  auto slot = self->state.pool.find(id);
  if (!slot || slot->st == session_pool::state::deleting)
    return fail(ec::not_found, "no session " + id);
  if (slot->st == session_pool::state::creating)
    return fail(ec::bad_request, "session " + id + " is still being created");
  if (slot->st == session_pool::state::warm)
    return fail(ec::bad_request, "session " + id + " is released: acquire it again");
  return slot;
}

session_task_actor spawn_task(self_ptr self) {
  return self->spawn(session_task, self->state.cp, self->state.opts.task);
}

/// A task for a command: tracked until it quits, so a drain can stop it.
session_task_actor spawn_command(self_ptr self) {
  auto task = spawn_task(self);
  self->monitor(task);
  self->state.commands.emplace(task.address(), task);
  return task;
}

} // namespace

result<session_manager_options> session_options_from_env(const policy::env_map& env) {
  session_manager_options o;
  auto replicas = policy::env_uint(env, "GUESTFLOW_SESSION_REPLICAS", 1, 1000);
  if (!replicas) return replicas.error();
  if (*replicas) o.pool.replicas = static_cast<uint32_t>(**replicas);
  auto idle = policy::env_uint(env, "GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS", 0, 604'800);
  if (!idle) return idle.error();
  if (*idle) o.pool.idle_timeout = std::chrono::seconds{**idle};
  auto cap = policy::env_uint(env, "GUESTFLOW_DOWNLOAD_CAP_BYTES", 1, uint64_t{1} << 40);
  if (!cap) return cap.error();
  if (*cap) o.task.download_cap_bytes = **cap;
  if (auto i = env.find("GUESTFLOW_DOWNLOAD_PREFIX"); i != env.end() && !i->second.empty()) {
    if (i->second[0] != '/' || i->second.find('\0') != std::string::npos)
      return fail(ec::bad_request, "GUESTFLOW_DOWNLOAD_PREFIX: must be an absolute path");
    o.task.download_prefix = i->second;
  }
  return o;
}

session_manager_actor::behavior_type
session_manager(session_manager_actor::stateful_pointer<session_manager_state> self,
                controlplane_actor cp, reaper_actor reaper, session_manager_options opts) {
  auto& st = self->state;
  st.cp = std::move(cp);
  st.reaper = std::move(reaper);
  st.pool = session_pool{opts.pool};
  st.opts = std::move(opts);
  self->set_down_handler([self](caf::down_msg& dm) { self->state.commands.erase(dm.source); });
  return {
      [self](acquire_atom, session_request& req) {
        auto rp = self->make_response_promise<info_promise>();
        acquire(self, std::move(req), rp);
        return rp;
      },
      [self](release_atom, std::string& id) -> caf::result<session_info> {
        auto& st = self->state;
        auto slot = st.pool.release(id, steady::now());
        if (!slot) return make_error(slot.error().code, slot.error().message);
        schedule_expiry(self);
        return info_of(*slot, true);
      },
      [self](delete_atom, std::string& id) {
        auto& st = self->state;
        auto rp = self->make_response_promise<info_promise>();
        auto slot = st.pool.begin_delete(id);
        if (!slot) {
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return rp;
        }
        auto info = info_of(*slot, true);
        delete_guest(self, *slot, [rp, info]() mutable { rp.deliver(info); });
        return rp;
      },
      [self](get_atom, std::string& id) -> caf::result<session_info> {
        auto slot = self->state.pool.find(id);
        if (!slot || slot->st == session_pool::state::deleting)
          return make_error(ec::not_found, "no session " + id);
        return info_of(*slot, true);
      },
      [self](run_atom, std::string& id,
             session_command& cmd) -> caf::delegated<command_outcome> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp = self->make_response_promise<caf::typed_response_promise<command_outcome>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_command(self), run_atom::value, (*slot)->guest_id,
                              std::move(cmd));
      },
      [self](stream_atom, std::string& id, session_command& cmd,
             line_relay_actor& relay) -> caf::delegated<command_outcome> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp = self->make_response_promise<caf::typed_response_promise<command_outcome>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_command(self), stream_atom::value, (*slot)->guest_id,
                              std::move(cmd), std::move(relay));
      },
      [self](fetch_atom, std::string& id,
             session_file_call& call) -> caf::delegated<session_file_answer> {
        auto slot = active(self, id);
        if (!slot) {
          auto rp =
              self->make_response_promise<caf::typed_response_promise<session_file_answer>>();
          rp.deliver(make_error(slot.error().code, slot.error().message));
          return {};
        }
        return self->delegate(spawn_task(self), fetch_atom::value, (*slot)->guest_id,
                              std::move(call));
      },
      [self](drain_atom) {
        auto& st = self->state;
        st.stopping = true;
        for (auto& [addr, task] : st.commands)
          caf::anon_send(task, cancel_atom::value);
      },
      [self](tick_atom) {
        auto& st = self->state;
        for (auto& slot : st.pool.expire(steady::now()))
          delete_guest(self, slot, [] {});
        schedule_expiry(self);
      },
  };
}

} // namespace guestflow
