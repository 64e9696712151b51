#pragma once

#include "actors/actors.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/atom.hpp>
#include <caf/duration.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <functional>
#include <type_traits>
#include <utility>

namespace guestflow {

/// Called once with the answer of an ask, on an actor thread: a caller that is not an actor
/// hops it onto its own thread.
template<class T>
using answer_callback = std::function<void(result<T>)>;

template<class T>
struct ask_state {
  static inline const char* name = "ask";
  answer_callback<T> done;
};

namespace detail {

/// How an ask actor's handler takes one element of its request: atoms by value (CAF 0.17
/// keeps them as atom_value), everything else by mutable reference, so that a large body
/// (a flow, a spec) moves into the request instead of being copied.
template<class R>
using ask_param = std::conditional_t<caf::is_atom_constant<R>::value, R, R&>;

} // namespace detail

/// One ask (see actors.hpp): forwards the request it receives to `dest` within `limit`,
/// hands the answer (a `T`) or the failure (`to_failure`: a timeout or a dead destination
/// is transient / unavailable) to `done`, then quits. It takes one request; spawn one per
/// request (`ask_for` does both).
template<class T, class Dest, class... Request>
typename ask_actor<Request...>::behavior_type
ask(typename ask_actor<Request...>::template stateful_pointer<ask_state<T>> self, Dest dest,
    caf::duration limit, answer_callback<T> done) {
  self->state.done = std::move(done);
  return {[self, dest, limit](detail::ask_param<Request>... xs) {
    self->request(dest, limit, std::move(xs)...)
        .then(
            [self](T& x) {
              self->state.done(std::move(x));
              self->quit();
            },
            [self](caf::error& e) {
              self->state.done(to_failure(e));
              self->quit();
            });
  }};
}

/// Makes one request of `dest` from a thread that must not wait on an actor: spawns an ask
/// actor and sends it the request; `done` gets the answer (or the failure) on an actor
/// thread. Returns the ask actor (tests watch it quit).
template<class T, class Dest, class... Ts>
ask_actor<std::decay_t<Ts>...> ask_for(caf::actor_system& sys, const Dest& dest,
                                       caf::duration limit, answer_callback<T> done,
                                       Ts&&... xs) {
  auto asker = sys.spawn(ask<T, Dest, std::decay_t<Ts>...>, dest, limit, std::move(done));
  caf::anon_send(asker, std::forward<Ts>(xs)...);
  return asker;
}

} // namespace guestflow
