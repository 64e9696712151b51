#pragma once

#include "actors/actors.hpp"
#include "messages/type_ids.hpp"

#include <atomic>
#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_clock.hpp>
#include <caf/actor_config.hpp>
#include <caf/actor_system.hpp>
#include <caf/duration.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/make_actor.hpp>
#include <caf/message_id.hpp>
#include <caf/monitorable_actor.hpp>
#include <caf/sec.hpp>
#include <functional>
#include <memory>
#include <utility>

namespace guestflow {

/// Called once with the answer of an ask, on one of the actor system's threads (the
/// answering actor's worker, or the clock's at the time limit), never on the asking one: a
/// caller that is not an actor hops it onto its own thread.
template<class T>
using answer_callback = std::function<void(result<T>)>;

namespace detail {

/// The sender of one ask's request: an actor with no mailbox, no behavior and no thread.
/// The answer (or CAF's error for it: the time limit, a dead destination) arrives through
/// `enqueue` on the thread that sends it and goes straight to the callback; then it is
/// terminated, which its monitors (the destination's watch on its caller) see.
/// Why not a scheduled actor per ask: a run in flight kept one (~1.3 KB with its behavior)
/// beside its execution, and its answer took two more mailbox hops.
template<class T>
class answer_sink final : public caf::monitorable_actor {
public:
  answer_sink(caf::actor_config& cfg, answer_callback<T> done)
      : caf::monitorable_actor(cfg)
      , done_(std::move(done)) {
    // Never scheduled, so never "initialized" by a scheduler; monitors still work.
  }

  const char* name() const override { return "ask"; }

  /// The request id this sink's one request carries (one per sink).
  static constexpr caf::message_id request_id() { return caf::make_message_id(1); }

  void enqueue(caf::mailbox_element_ptr what, caf::execution_unit* host) override {
    // Only the answer is ever addressed here (nothing else knows this actor).
    if (!what || what->mid != request_id().response_id()) return;
    auto& x = what->content();
    if (x.match_elements<T>())
      answer(std::move(x.get_mutable_as<T>(0)), host);
    else if (x.match_elements<caf::error>())
      answer(to_failure(x.get_as<caf::error>(0)), host);
    else
      answer(to_failure(caf::make_error(caf::sec::unexpected_response)), host);
  }

  /// Set while the request is being sent: a destination already gone bounces it at once,
  /// on the asking thread, which must not run the callback.
  static inline thread_local answer_sink* sending = nullptr;
  /// What bounced; on the heap, as a run's answer is large and hardly ever bounces.
  std::unique_ptr<result<T>> bounced;

  /// Hands `r` over, unless it bounced while being sent (ask_for hands that over).
  void answer(result<T> r, caf::execution_unit* host) {
    if (sending == this) {
      if (!bounced) bounced = std::make_unique<result<T>>(std::move(r));
      return;
    }
    deliver(std::move(r), host);
  }

  /// Hands `r` to the callback once; later answers (a time limit racing the reply) are
  /// dropped.
  void deliver(result<T> r, caf::execution_unit* host) {
    if (answered_.exchange(true)) return;
    home_system().clock().cancel_request_timeout(this, request_id().response_id());
    auto done = std::move(done_);
    done_ = nullptr;
    done(std::move(r));
    cleanup(caf::exit_reason::normal, host);
  }

protected:
  /// Destroyed unanswered: the request was dropped (a destination that ended holding it
  /// without replying, with no time limit). The caller still hears of it.
  void on_destroy() override {
    if (!answered_.exchange(true) && done_)
      done_(failure{ec::unavailable, "the request was dropped unanswered"});
    if (!getf(is_cleaned_up_flag)) cleanup(caf::exit_reason::unreachable, nullptr);
  }

private:
  answer_callback<T> done_;
  std::atomic<bool> answered_{false};
};

} // namespace detail

/// Makes one request of `dest` from a thread that must not wait on an actor: `done` gets
/// the answer (a `T`) or the failure (`to_failure`: past `limit` it is transient, a dead
/// destination unavailable), once. Returns the asking actor (tests watch it end).
template<class T, class Dest, class... Ts>
caf::actor ask_for(caf::actor_system& sys, const Dest& dest, caf::duration limit,
                   answer_callback<T> done, Ts&&... xs) {
  using sink = detail::answer_sink<T>;
  caf::actor_config cfg;
  auto self = caf::make_actor<sink, caf::strong_actor_ptr>(sys.next_actor_id(), sys.node(),
                                                           &sys, cfg, std::move(done));
  auto* s = static_cast<sink*>(caf::actor_cast<caf::abstract_actor*>(self));
  auto to = caf::actor_cast<caf::strong_actor_ptr>(dest);
  if (!to) {
    s->bounced =
        std::make_unique<result<T>>(failure{ec::unavailable, "no destination for the request"});
  } else {
    // The limit is set before the request leaves: an answer faster than this thread then
    // always finds it to cancel, and the sink is never kept alive by a stale timeout.
    if (limit.valid()) {
      auto t = sys.clock().now();
      t += limit;
      sys.clock().set_request_timeout(t, s, sink::request_id().response_id());
    }
    sink::sending = s;
    to->get()->enqueue(
        caf::make_mailbox_element(self, sink::request_id(), {}, std::forward<Ts>(xs)...),
        nullptr);
    sink::sending = nullptr;
  }
  if (s->bounced) {
    // Rare (shutdown): the callback runs on an actor thread, as every other answer does.
    sys.clock().cancel_request_timeout(s, sink::request_id().response_id());
    sys.spawn([self, r = std::move(*s->bounced)](caf::event_based_actor*) mutable {
      static_cast<sink*>(caf::actor_cast<caf::abstract_actor*>(self))
          ->deliver(std::move(r), nullptr);
    });
    s->bounced.reset();
  }
  return caf::actor_cast<caf::actor>(self);
}

} // namespace guestflow
