#include "actors/controlplane.hpp"

#include "actors/caf_bridge.hpp"

#include <caf/response_promise.hpp>
#include <caf/send.hpp>
#include <caf/typed_response_promise.hpp>

namespace guestflow {
namespace {

using self_ptr = controlplane_actor::stateful_pointer<controlplane_state>;

/// A client callback that answers one request straight from the client thread
/// (caf_bridge::reply_from_any_thread): no `done` hop through this actor, no pending
/// entry, no second message per call.
template<class T>
struct reply_to {
  caf_bridge::reply_address to;

  void operator()(result<T> r) {
    if (r)
      caf_bridge::reply_from_any_thread(std::move(to), std::move(*r));
    else
      caf_bridge::reply_from_any_thread(
          std::move(to), make_error(r.error().code, std::move(r).error().message));
  }
};

/// Starts `start(callback)`; the callback answers the request from the client thread.
template<class T, class Start>
caf::typed_response_promise<T> call(self_ptr self, Start&& start) {
  auto [rp, to] = caf_bridge::take_over_request<T>(self);
  start(reply_to<T>{std::move(to)});
  return rp; // pending for good: answered through reply_to, never delivered here
}

/// Starts `start(callback)` and returns a promise that the callback's result fulfils once
/// it has hopped back onto this actor (for streams, whose bookkeeping lives here).
template<class T, class Start>
caf::typed_response_promise<T> call_via_actor(self_ptr self, Start&& start,
                                              std::function<void()> cleanup) {
  auto rp = self->make_response_promise<caf::typed_response_promise<T>>();
  auto id = ++self->state.next_call;
  self->state.pending.emplace(id,
                              [rp, cleanup = std::move(cleanup)](caf::message& msg) mutable {
                                if (cleanup) cleanup();
                                if (msg.match_elements<caf::error>())
                                  rp.deliver(msg.get_as<caf::error>(0));
                                else
                                  rp.deliver(std::move(msg.get_mutable_as<T>(0)));
                              });
  controlplane_actor handle = self;
  start([handle, id](result<T> r) {
    auto msg = r ? caf::make_message(std::move(*r))
                 : caf::make_message(make_error(r.error().code, std::move(r).error().message));
    caf::anon_send(handle, done_atom::value, id, std::move(msg));
  });
  return rp;
}

/// Collects every page of a list call, then completes once.
void list_all(std::shared_ptr<cp::client> client, std::string status, cp::millis timeout,
              sandbox_list acc, cp::callback<sandbox_list> cb) {
  constexpr uint32_t page = 100;
  auto offset = static_cast<uint32_t>(acc.data.size());
  client->list(status, page, offset, timeout,
               [client, status, timeout, acc = std::move(acc),
                cb = std::move(cb)](result<sandbox_list> r) mutable {
                 if (!r) return cb(std::move(r).error());
                 auto got = r->data.size();
                 for (auto& v : r->data)
                   acc.data.push_back(std::move(v));
                 acc.total = r->total;
                 if (got < page || acc.data.size() >= acc.total) return cb(std::move(acc));
                 list_all(std::move(client), std::move(status), timeout, std::move(acc),
                          std::move(cb));
               });
}

} // namespace

controlplane_actor::behavior_type
controlplane(controlplane_actor::stateful_pointer<controlplane_state> self,
             std::shared_ptr<cp::client> client, controlplane_timeouts timeouts) {
  self->state.client = std::move(client);
  self->state.timeouts = timeouts;
  auto& st = self->state;
  return {
      [self, &st](create_atom, sandbox_create_request& req) {
        return call<sandbox_created>(
            self, [&](auto cb) { st.client->create(req, st.timeouts.create, std::move(cb)); });
      },
      [self, &st](get_atom, std::string& id) {
        return call<sandbox_view>(
            self, [&](auto cb) { st.client->get(id, st.timeouts.query, std::move(cb)); });
      },
      [self, &st](list_atom, std::string& status) {
        return call<sandbox_list>(self, [&](auto cb) {
          list_all(st.client, status, st.timeouts.query, {}, std::move(cb));
        });
      },
      [self, &st](put_atom, std::string& id, std::string& path, shared_bytes& bytes) {
        return call<bool>(self, [&](auto cb) {
          st.client->put_file(id, path, std::move(bytes), st.timeouts.files, std::move(cb));
        });
      },
      [self, &st](fetch_atom, std::string& id, std::string& path, uint64_t cap) {
        return call<std::string>(self, [&](auto cb) {
          st.client->get_file(id, path, cap, st.timeouts.files, std::move(cb));
        });
      },
      [self, &st](exec_atom, std::string& id, exec_request& req, uint64_t deadline_ms) {
        return call<exec_result>(self, [&](auto cb) {
          st.client->exec(id, req, cp::millis{deadline_ms}, std::move(cb));
        });
      },
      [self, &st](stream_atom, std::string& id, exec_request& req, uint64_t deadline_ms,
                  exec_sink_actor& sink) {
        auto key = sink.address();
        return call_via_actor<int32_t>(
            self,
            [&](auto cb) {
              cp::exec_stream_callbacks cbs;
              cbs.on_line = [sink](exec_stream_line line) {
                caf::anon_send(sink, std::move(line));
              };
              cbs.on_done = std::move(cb);
              st.streams[key] =
                  st.client->exec_stream(id, req, cp::millis{deadline_ms}, std::move(cbs));
            },
            [&st, key] { st.streams.erase(key); });
      },
      [&st](cancel_atom, const exec_sink_actor& sink) {
        if (auto i = st.streams.find(sink.address()); i != st.streams.end()) {
          if (i->second) i->second->cancel();
          st.streams.erase(i);
        }
      },
      [self, &st](resume_atom, std::string& id) {
        return call<sandbox_view>(
            self, [&](auto cb) { st.client->resume(id, st.timeouts.query, std::move(cb)); });
      },
      [self, &st](stop_atom, std::string& id) {
        return call<sandbox_view>(
            self, [&](auto cb) { st.client->stop(id, st.timeouts.remove, std::move(cb)); });
      },
      [self, &st](delete_atom, std::string& id) {
        return call<sandbox_deleted>(
            self, [&](auto cb) { st.client->remove(id, st.timeouts.remove, std::move(cb)); });
      },
      [self, &st](delete_atom, std::string& id, uint32_t idle_s) {
        return call<sandbox_deleted>(self, [&](auto cb) {
          st.client->remove_if_idle(id, idle_s, st.timeouts.remove, std::move(cb));
        });
      },
      [self, &st](egress_atom, std::string& id) {
        return call<egress_body>(self, [&](auto cb) {
          st.client->get_egress(id, st.timeouts.query, std::move(cb));
        });
      },
      [&st](done_atom, uint64_t id, caf::message& msg) {
        auto i = st.pending.find(id);
        if (i == st.pending.end()) return;
        auto complete = std::move(i->second);
        st.pending.erase(i);
        complete(msg);
      },
  };
}

} // namespace guestflow
