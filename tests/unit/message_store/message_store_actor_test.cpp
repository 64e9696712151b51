// The message store's actor and the session recorder (actors/message_store,
// actors/session_recorder) on the deterministic scheduler, over real files.

#include "actors/caf_bridge.hpp"
#include "actors/event_handoff.hpp"
#include "actors/message_store.hpp"
#include "actors/session_recorder.hpp"
#include "deterministic.hpp"
#include "tests/support/temp_dir.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

using namespace guestflow;
using namespace guestflow::test;

namespace {

raw_json message(const std::string& text) {
  return *parse_raw_json(R"({"text":)" + quote_json(text) + R"(,"session_id":"s"})");
}

run_event event(run_event::kind k, uint64_t seq) {
  run_event e;
  e.run_id = "run-1";
  e.seq = seq;
  e.type = k;
  return e;
}

run_event message_event(uint64_t seq, const std::string& text) {
  auto e = event(run_event::kind::message, seq);
  e.id = "ChatOutput-1";
  e.extras.edit().data = message(text);
  return e;
}

class message_store_actor_test : public deterministic {
protected:
  test_support::temp_dir tmp{"guestflow-store-actor"};
  message_files files{tmp.path()};
  message_store_actor store = sys.spawn(message_store, tmp.path(), message_store_limits{});

  ~message_store_actor_test() override {
    caf::anon_send_exit(store, caf::exit_reason::user_shutdown);
    run();
  }

  /// Asks `store` for the history of `req`; the reply or the error.
  std::variant<run_request, failure> history_of(run_request req) {
    std::optional<std::variant<run_request, failure>> out;
    auto asker = sys.spawn([&](caf::event_based_actor* self) {
      self->request(store, caf::infinite, get_atom::value, std::move(req))
          .then([&](run_request& r) { out.emplace(std::move(r)); },
                [&](caf::error& e) { out.emplace(to_failure(e)); });
    });
    run();
    EXPECT_TRUE(out.has_value());
    return out ? std::move(*out) : std::variant<run_request, failure>{failure{}};
  }
};

} // namespace

TEST_F(message_store_actor_test, a_session_without_history_gets_the_stored_messages) {
  ASSERT_TRUE(files.append("s", message("hello")));
  ASSERT_TRUE(files.append("s", message("hi, you said hello")));
  run_request req;
  req.session_id = "s";
  auto r = history_of(req);
  ASSERT_TRUE(std::holds_alternative<run_request>(r));
  auto& filled = std::get<run_request>(r);
  ASSERT_TRUE(filled.history);
  ASSERT_EQ(filled.history->size(), 2u);
  EXPECT_EQ((*filled.history)[0], message("hello"));
  EXPECT_EQ((*filled.history)[1], message("hi, you said hello"));
  // A new session: an empty history, which still tells the guest "no memory yet".
  req.session_id = "new";
  auto fresh = std::get<run_request>(history_of(req));
  ASSERT_TRUE(fresh.history);
  EXPECT_TRUE(fresh.history->empty());
}

TEST_F(message_store_actor_test, a_caller_history_or_no_session_is_left_alone) {
  ASSERT_TRUE(files.append("s", message("stored")));
  run_request req;
  req.session_id = "s";
  req.history = std::vector<raw_json>{message("the caller's")};
  EXPECT_EQ(std::get<run_request>(history_of(req)), req);
  run_request plain;
  auto back = std::get<run_request>(history_of(plain));
  EXPECT_FALSE(back.history);
}

TEST_F(message_store_actor_test, a_bad_session_id_is_bad_request) {
  run_request req;
  req.session_id = std::string(200, 'x');
  auto r = history_of(req);
  ASSERT_TRUE(std::holds_alternative<failure>(r));
  EXPECT_EQ(std::get<failure>(r).code, ec::bad_request);
}

TEST_F(message_store_actor_test, the_recorder_stores_messages_and_passes_every_event_on) {
  auto queue = std::make_shared<run_event_queue>();
  auto caller = sys.spawn(event_handoff, queue);
  auto recorder = sys.spawn(session_recorder, store, std::string{"s"}, caller, false);
  caf::anon_send(recorder, event(run_event::kind::vertex_started, 0));
  caf::anon_send(recorder, message_event(1, "hello"));
  caf::anon_send(recorder, message_event(2, "hello back"));
  caf::anon_send(recorder, event(run_event::kind::complete, 3));
  run();
  for (uint64_t i = 0; i < 4; ++i)
    EXPECT_EQ(queue->pop().seq, i);
  auto stored = files.load("s");
  ASSERT_TRUE(stored);
  EXPECT_EQ(*stored, (std::vector<raw_json>{message("hello"), message("hello back")}));
  // It quit after the terminal event: a later send finds nobody.
  caf::anon_send(recorder, message_event(4, "late"));
  run();
  EXPECT_EQ(files.load("s")->size(), 2u);
  caf::anon_send_exit(caller, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(message_store_actor_test, the_recorder_passes_on_the_runs_own_message_not_a_copy) {
  auto seen = std::make_shared<std::vector<const run_event*>>();
  run_subscriber_actor caller =
      sys.spawn([seen](run_subscriber_actor::pointer) -> run_subscriber_actor::behavior_type {
        return {[seen](const run_event& e) { seen->push_back(&e); }};
      });
  auto recorder = sys.spawn(session_recorder, store, std::string{"s"}, caller, false);
  // As a run publishes: one message, kept in its log, enqueued to its subscribers.
  caf_bridge::shared_message<run_event> msg{message_event(0, "hello")};
  sys.spawn([recorder, msg](caf::event_based_actor* self) {
    caf_bridge::enqueue_shared(self, recorder, msg);
  });
  run();
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ(seen->front(), &msg.get()) << "the caller got a copy of the event";
  EXPECT_EQ(*files.load("s"), (std::vector<raw_json>{message("hello")}));
  caf::anon_send_exit(recorder, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(caller, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(message_store_actor_test, a_caller_gone_without_cancel_still_gets_the_run_stored) {
  auto queue = std::make_shared<run_event_queue>();
  auto caller = sys.spawn(event_handoff, queue);
  auto recorder = sys.spawn(session_recorder, store, std::string{"s"}, caller, false);
  caf::anon_send_exit(caller, caf::exit_reason::user_shutdown);
  run();
  caf::anon_send(recorder, message_event(0, "after the caller left"));
  caf::anon_send(recorder, event(run_event::kind::complete, 1));
  run();
  EXPECT_EQ(*files.load("s"), (std::vector<raw_json>{message("after the caller left")}));
}

TEST_F(message_store_actor_test, a_caller_gone_with_cancel_takes_the_recorder_with_it) {
  auto queue = std::make_shared<run_event_queue>();
  auto caller = sys.spawn(event_handoff, queue);
  auto recorder = sys.spawn(session_recorder, store, std::string{"s"}, caller, true);
  bool down = false;
  auto watcher = sys.spawn([&down, recorder](caf::event_based_actor* self) -> caf::behavior {
    self->monitor(recorder);
    self->set_down_handler([&down, self](caf::down_msg&) {
      down = true;
      self->quit();
    });
    return {[](int32_t) {}};
  });
  run();
  EXPECT_FALSE(down);
  caf::anon_send_exit(caller, caf::exit_reason::user_shutdown);
  run();
  EXPECT_TRUE(down); // the run sees its subscriber go, as it would have seen the caller
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(message_store_actor_test, drain_answers_after_every_earlier_append) {
  for (int i = 0; i < 3; ++i)
    caf::anon_send(store, put_atom::value, std::string{"s"}, message(std::to_string(i)));
  bool drained = false;
  auto asker = sys.spawn([&](caf::event_based_actor* self) {
    self->request(store, caf::infinite, drain_atom::value).then([&](bool) {
      drained = files.load("s")->size() == 3;
    });
  });
  run();
  EXPECT_TRUE(drained);
}
