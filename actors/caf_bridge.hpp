#pragma once

// The two places where guestflow goes below CAF 0.17's public actor API, behind one adapter
// so that a CAF upgrade has one file to review and one test (caf_bridge_test) to fail:
//
// 1. A request answered from a thread that is not the actor's (a control-plane client
//    completion): the actor takes the request over, and the completion enqueues the very
//    response element CAF would have built, with no hop back through the actor. Relies on
//    CAF 0.17: a response promise dropped undelivered sends nothing (0.18+ sends
//    `broken_promise`), and a mailbox element enqueued without an execution unit schedules
//    its receiver thread-safely.
// 2. One message, built once, enqueued to many receivers: a run's event fans out to N
//    subscribers without N copies. Relies on caf::message being a shared, copy-on-write
//    tuple that `enqueue` takes as is.

#include <caf/actor_cast.hpp>
#include <caf/actor_control_block.hpp>
#include <caf/check_typed_input.hpp>
#include <caf/local_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/message.hpp>
#include <caf/response_promise.hpp>
#include <caf/response_type.hpp>
#include <caf/typed_response_promise.hpp>
#include <utility>

namespace guestflow::caf_bridge {

// -- 1. answering from any thread ----------------------------------------------------------

/// Where the answer to one request goes, detached from the actor that received it.
struct reply_address {
  caf::strong_actor_ptr self;   ///< the actor that took the request (the response's sender)
  caf::strong_actor_ptr source; ///< the requester
  caf::response_promise::forwarding_stack stages;
  caf::message_id id; ///< the request's id
};

/// Takes over the request `self` is handling (call it from that handler): returns the
/// promise the handler must return — it stays pending for good, so CAF sends nothing
/// itself — and the address to answer at with reply_from_any_thread.
template<class T, class Self>
std::pair<caf::typed_response_promise<T>, reply_address> take_over_request(Self* self) {
  auto rp = self->template make_response_promise<caf::typed_response_promise<T>>();
  caf::response_promise& p = rp;
  reply_address to{self->ctrl(), p.source(), p.stages(), p.id()};
  return {std::move(rp), std::move(to)};
}

/// Answers the request at `to` with `value` (the request's result type, or a caf::error)
/// from any thread: one mailbox element built around the value, as CAF builds a response,
/// enqueued without an execution unit. The requester's `.then` / `.receive` sees an
/// ordinary response (or error) to its request id. Answer each address once.
template<class V>
void reply_from_any_thread(reply_address to, V&& value) {
  if (!to.stages.empty()) { // forwarded: the next stage answers the original source
    auto next = std::move(to.stages.back());
    to.stages.pop_back();
    next->enqueue(caf::make_mailbox_element(std::move(to.source), to.id, std::move(to.stages),
                                            std::forward<V>(value)),
                  nullptr);
  } else if (to.source) {
    to.source->enqueue(caf::make_mailbox_element(std::move(to.self), to.id.response_id(), {},
                                                 std::forward<V>(value)),
                       nullptr);
  }
}

// -- 2. one message for many receivers -----------------------------------------------------

/// A message holding one T, built once and shared by every receiver it is enqueued to.
template<class T>
class shared_message {
public:
  explicit shared_message(T value)
      : msg_(caf::make_message(std::move(value))) {}

  const T& get() const { return msg_.get_as<T>(0); }
  const caf::message& message() const { return msg_; }

private:
  caf::message msg_;
};

/// Enqueues `msg` as an asynchronous message from `self` to `to` (nothing if `to` is
/// invalid), without copying its value: N receivers share one T. A receiver that takes the
/// value by `const T&` reads the shared one; one that takes `T&` gets its own copy from CAF
/// (copy-on-write) unless it is the last holder. The receiver's interface must accept T.
void enqueue_shared(caf::local_actor* self, const caf::strong_actor_ptr& to,
                    const caf::message& msg);

template<class Handle, class T>
void enqueue_shared(caf::local_actor* self, const Handle& to, const shared_message<T>& msg) {
  static_assert(
      caf::response_type_unbox<caf::signatures_of_t<Handle>, caf::detail::type_list<T>>::valid,
      "the receiver does not accept this message");
  enqueue_shared(self, caf::actor_cast<caf::strong_actor_ptr>(to), msg.message());
}

} // namespace guestflow::caf_bridge
