// The coordinator and its run actors under the deterministic scheduler, against the
// scripted control plane: event order and seq, replay, fan-out, cancel, disconnects,
// admission, every way a run ends — each with exactly one terminal event.

#include "actors/coordinator.hpp"
#include "actors/reaper.hpp"
#include "tests/unit/actors/deterministic.hpp"
#include "tests/unit/actors/scripted_controlplane.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <functional>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

using ek = run_event::kind;

/// What one subscriber saw, and the control plane's state whenever a terminal arrived.
struct seen {
  std::vector<run_event> events;
  std::vector<size_t> live_guests_at_terminal;
};

run_subscriber_actor::behavior_type
recorder(run_subscriber_actor::pointer, std::shared_ptr<seen> out, std::shared_ptr<script> s) {
  return {[out, s](run_event& e) {
    if (e.terminal()) out->live_guests_at_terminal.push_back(s->live());
    out->events.push_back(std::move(e));
  }};
}

template<class T>
struct reply {
  std::optional<T> value;
  std::optional<failure> error;
};

exec_stream_line chunk(std::string text) {
  return {exec_stream_line::kind::stdout_chunk, std::move(text), 0};
}

/// Each frame as its own stdout chunk, newline-terminated.
std::vector<exec_stream_line> frames(std::initializer_list<std::string> lines) {
  std::vector<exec_stream_line> out;
  for (auto& l : lines)
    out.push_back(chunk(l + "\n"));
  return out;
}

const std::string start_a = R"({"t":"vertex_start","id":"A","name":"Chat Input"})";
const std::string built_a =
    R"({"t":"step","event":{"type":"vertex","id":"A","name":"Chat Input",)"
    R"("valid":true,"duration_ms":3,"outputs":{"message":"hi"},"logs":""}})";
const std::string start_b = R"({"t":"vertex_start","id":"B","name":"Chat Output"})";
const std::string built_b =
    R"({"t":"step","event":{"type":"vertex","id":"B","name":"Chat Output",)"
    R"("valid":true,"duration_ms":1,"outputs":{"message":"hi"},"logs":""}})";
const std::string outputs =
    R"({"t":"outputs","run_outputs":[{"inputs":{"input_value":"hi"},)"
    R"("outputs":[{"component_id":"B","component_display_name":"Chat Output"}]}]})";
const std::string done = R"({"t":"done"})";

void expect_well_formed(const std::vector<run_event>& evs, const std::string& run_id,
                        uint64_t first = 0);

class coordinator_test : public deterministic {
protected:
  std::shared_ptr<script> s = std::make_shared<script>();
  controlplane_actor cp;
  reaper_actor rp;
  coordinator_actor co;
  coordinator_options opts;
  std::vector<caf::actor> helpers;
  std::vector<run_subscriber_actor> subscribers;

  void SetUp() override {
    cp = sys.spawn(scripted_controlplane, s);
    reaper_options ro;
    ro.owner = "abc123";
    rp = sys.spawn(reaper, cp, ro);
    opts.owner = "abc123";
    opts.seed = 7;
    opts.assets = {{"runner.py", "print('runner')"}, {"unpack_run.py", "# unpack"}};
    // A two-vertex flow that ends well, unless a test scripts otherwise.
    s->stream_lines = frames({start_a, built_a, start_b, built_b, "user print", outputs, done});
    s->stream_exit = 0;
    run();
  }

  void TearDown() override {
    for (auto& h : helpers)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    for (auto& h : subscribers)
      caf::anon_send_exit(h, caf::exit_reason::user_shutdown);
    if (co) caf::anon_send_exit(co, caf::exit_reason::user_shutdown);
    run();
    for (int i = 0; i < 5; ++i) // lets every backstop fire: nothing may outlive the test
      advance(30min);
    caf::anon_send_exit(cp, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(rp, caf::exit_reason::user_shutdown);
    run();
  }

  void boot() {
    co = sys.spawn(coordinator, cp, rp, opts);
    run();
  }

  /// Sends a request to the coordinator from a fresh actor and runs to quiescence.
  template<class T, class... Ts>
  std::shared_ptr<reply<T>> ask(Ts... xs) {
    auto out = std::make_shared<reply<T>>();
    auto target = co;
    helpers.push_back(sys.spawn([=](caf::event_based_actor* self) {
      self->request(target, std::chrono::seconds{3600}, xs...)
          .then([out](T& v) { out->value = std::move(v); },
                [out](caf::error& e) { out->error = to_failure(e); });
    }));
    run();
    return out;
  }

  std::pair<run_subscriber_actor, std::shared_ptr<seen>> subscriber() {
    auto out = std::make_shared<seen>();
    auto h = sys.spawn(recorder, out, s);
    subscribers.push_back(h);
    return {h, out};
  }

  static run_request hello() {
    auto r = decode<run_request>(R"({"flow":{"nodes":[{"id":"A","data":{"type":"ChatInput"}},)"
                                 R"({"id":"B","data":{"type":"ChatOutput"}}],)"
                                 R"("edges":[{"source":"A","target":"B"}]},"inputs":"hi"})");
    EXPECT_TRUE(r);
    return *r;
  }

  std::string start(run_subscriber_actor sub = {}, bool cancel_on_disconnect = false) {
    auto r = sub ? ask<std::string>(run_atom::value, hello(), sub, cancel_on_disconnect)
                 : ask<std::string>(run_atom::value, hello());
    EXPECT_TRUE(r->value) << (r->error ? r->error->message : "no reply");
    return r->value.value_or("");
  }

  std::shared_ptr<reply<uint64_t>> subscribe(const std::string& id, uint64_t from,
                                             run_subscriber_actor sub, bool cod = false) {
    return ask<uint64_t>(subscribe_atom::value, id, from, sub, cod);
  }

  /// A run whose guest printed one vertex_start and keeps running (the stream never ends).
  std::tuple<std::string, run_subscriber_actor, std::shared_ptr<seen>>
  hung_run(bool cancel_on_disconnect = false) {
    s->calls["stream"] = {call_script::mode::hang, ec::transient, 1};
    s->stream_lines = frames({start_a});
    boot();
    auto [sub, got] = subscriber();
    auto id = start(sub, cancel_on_disconnect);
    EXPECT_EQ(got->events.size(), 1u);
    EXPECT_EQ(s->live(), 1u);
    return {id, sub, got};
  }

  /// Boots, runs one flow with one subscriber to its end and returns what it saw: a
  /// well-formed event stream, and the guest gone once the run settled.
  std::vector<run_event> run_to_end() {
    boot();
    auto [sub, got] = subscriber();
    auto id = start(sub);
    expect_well_formed(got->events, id);
    EXPECT_EQ(got->live_guests_at_terminal.size(), 1u);
    EXPECT_EQ(s->live(), 0u);
    return got->events;
  }

  coordinator_stats stats() {
    auto r = ask<coordinator_stats>(stats_atom::value);
    EXPECT_TRUE(r->value);
    return r->value.value_or(coordinator_stats{});
  }

  int count(const std::string& prefix) const {
    int n = 0;
    for (auto& l : s->log)
      n += l.rfind(prefix, 0) == 0;
    return n;
  }
};

/// Gapless seqs from `first`, one run id, exactly one terminal event and it is the last.
void expect_well_formed(const std::vector<run_event>& evs, const std::string& run_id,
                        uint64_t first) {
  ASSERT_FALSE(evs.empty());
  for (size_t i = 0; i < evs.size(); ++i) {
    EXPECT_EQ(evs[i].run_id, run_id) << i;
    EXPECT_EQ(evs[i].seq, first + i) << i;
    EXPECT_EQ(evs[i].terminal(), i + 1 == evs.size())
        << "event " << i << ": " << encode(evs[i]);
  }
}

std::vector<ek> kinds(const std::vector<run_event>& evs) {
  std::vector<ek> out;
  for (auto& e : evs)
    out.push_back(e.type);
  return out;
}

const std::vector<ek> happy_kinds{ek::vertex_started, ek::vertex_built, ek::vertex_started,
                                  ek::vertex_built,   ek::stdout_line,  ek::complete};

} // namespace

TEST_F(coordinator_test, events_arrive_in_order_with_gapless_seq_and_the_guest_is_deleted) {
  boot();
  auto [sub, got] = subscriber();
  auto id = start(sub);
  EXPECT_EQ(id.rfind("run-", 0), 0u);
  expect_well_formed(got->events, id);
  EXPECT_EQ(kinds(got->events), happy_kinds);
  EXPECT_EQ(got->events[1].name, "Chat Input");
  EXPECT_EQ(got->events[1].outputs.text, R"({"message":"hi"})");
  EXPECT_EQ(got->events[4].line, "user print");
  ASSERT_EQ(got->events[5].run_outputs_list.size(), 1u);
  EXPECT_EQ(got->events[5].run_outputs_list[0].outputs[0]->component_id, "B");
  // The guest was made, fed as specified and deleted once.
  EXPECT_EQ(s->live(), 0u);
  ASSERT_EQ(s->guests.size(), 1u);
  auto name = s->guests[0].name;
  EXPECT_EQ(name.rfind("gf-x-abc123-", 0), 0u);
  EXPECT_EQ(name.size(), 22u);
  EXPECT_EQ(s->log,
            (std::vector<std::string>{"create " + name, "put sb-1 /workspace/.run-bundle",
                                      "stream sb-1", "cancel", "delete sb-1"}));
  auto st = stats();
  EXPECT_EQ(st.accepted, 1u);
  EXPECT_EQ(st.finished, 1u);
  EXPECT_EQ(st.inflight, 0u);
  EXPECT_EQ(st.runs, 1u); // retained for late joiners
}

TEST_F(coordinator_test, a_late_subscriber_gets_the_whole_run_from_seq_zero) {
  boot();
  auto [live, live_got] = subscriber();
  auto id = start(live);
  auto [late, late_got] = subscriber();
  auto r = subscribe(id, 0, late);
  ASSERT_TRUE(r->value);
  EXPECT_EQ(*r->value, 6u);
  expect_well_formed(late_got->events, id);
  EXPECT_EQ(late_got->events, live_got->events);
}

TEST_F(coordinator_test, a_run_started_without_subscribers_is_joinable_later) {
  boot();
  auto id = start();
  auto [late, got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, late)->value);
  expect_well_formed(got->events, id);
  EXPECT_EQ(kinds(got->events), happy_kinds);
}

TEST_F(coordinator_test, fan_out_to_three_subscribers_is_identical) {
  s->calls["create"] = {call_script::mode::hang, ec::transient, 1};
  boot();
  auto [a, got_a] = subscriber();
  auto [b, got_b] = subscriber();
  auto [c, got_c] = subscriber();
  auto id = start(a);
  ASSERT_TRUE(subscribe(id, 0, b)->value);
  ASSERT_TRUE(subscribe(id, 0, c)->value);
  EXPECT_TRUE(got_a->events.empty()); // the guest is still being created
  ASSERT_TRUE(s->held_create);
  sandbox_created made;
  made.id = s->guests[0].id;
  made.name = s->guests[0].name;
  caf::anon_send(cp, done_atom::value, uint64_t{0}, caf::make_message(made));
  run();
  expect_well_formed(got_a->events, id);
  EXPECT_EQ(kinds(got_a->events), happy_kinds);
  EXPECT_EQ(got_b->events, got_a->events);
  EXPECT_EQ(got_c->events, got_a->events);
}

TEST_F(coordinator_test, a_subscriber_may_start_at_any_seq_up_to_the_last) {
  boot();
  auto id = start();
  auto [sub, got] = subscriber();
  auto r = subscribe(id, 3, sub);
  ASSERT_TRUE(r->value);
  expect_well_formed(got->events, id, 3);
  EXPECT_EQ(got->events.size(), 3u);
  auto [past, past_got] = subscriber();
  for (uint64_t from : {6u, 99u}) {
    auto bad = subscribe(id, from, past);
    ASSERT_TRUE(bad->error) << from;
    EXPECT_EQ(bad->error->code, ec::bad_request);
  }
  EXPECT_TRUE(past_got->events.empty());
  auto unknown = subscribe("run-nope", 0, past);
  ASSERT_TRUE(unknown->error);
  EXPECT_EQ(unknown->error->code, ec::not_found);
}

TEST_F(coordinator_test, live_subscribers_see_events_before_the_run_ends) {
  s->calls["stream"] = {call_script::mode::hang, ec::transient, 1};
  s->stream_lines = frames({start_a, built_a});
  s->stream_lines.push_back(chunk(start_b.substr(0, 10))); // a frame cut across chunks
  boot();
  auto [sub, got] = subscriber();
  auto id = start(sub);
  EXPECT_EQ(kinds(got->events), (std::vector<ek>{ek::vertex_started, ek::vertex_built}));
  EXPECT_EQ(s->live(), 1u);
  auto [late, late_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 1, late)->value);
  EXPECT_EQ(late_got->events.size(), 1u);
  EXPECT_EQ(late_got->events[0].seq, 1u);
}

TEST_F(coordinator_test, subscribing_again_moves_a_subscriber_instead_of_doubling_it) {
  s->calls["create"] = {call_script::mode::hang, ec::transient, 1};
  boot();
  auto [sub, got] = subscriber();
  auto id = start(sub);
  ASSERT_TRUE(subscribe(id, 0, sub)->value);
  sandbox_created made;
  made.id = s->guests[0].id;
  caf::anon_send(cp, done_atom::value, uint64_t{0}, caf::make_message(made));
  run();
  expect_well_formed(got->events, id);
  EXPECT_EQ(kinds(got->events), happy_kinds);
}

TEST_F(coordinator_test, cancel_kills_the_exec_deletes_the_guest_and_ends_with_one_error) {
  auto [id, sub, got] = hung_run();
  auto r = ask<bool>(cancel_atom::value, id);
  ASSERT_TRUE(r->value);
  EXPECT_TRUE(*r->value);
  expect_well_formed(got->events, id);
  auto& last = got->events.back();
  EXPECT_EQ(last.type, ek::error);
  EXPECT_EQ(last.code, ec::cancelled);
  EXPECT_EQ(last.message, "run cancelled by the caller");
  EXPECT_EQ(got->live_guests_at_terminal, std::vector<size_t>{0});
  EXPECT_EQ(count("cancel"), 1);
  EXPECT_EQ(count("delete sb-1"), 1);
  auto again = ask<bool>(cancel_atom::value, id);
  ASSERT_TRUE(again->value);
  EXPECT_FALSE(*again->value); // already ended
  EXPECT_EQ(got->events.size(), 2u);
  auto unknown = ask<bool>(cancel_atom::value, std::string{"run-nope"});
  ASSERT_TRUE(unknown->error);
  EXPECT_EQ(unknown->error->code, ec::not_found);
}

TEST_F(coordinator_test, disconnect_cancels_only_when_the_last_subscriber_asked_for_it) {
  auto [id, first, first_got] = hung_run(true);
  auto [second, second_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, second, false)->value);
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown); // asked, but not the last
  run();
  EXPECT_EQ(s->live(), 1u);
  caf::anon_send_exit(second, caf::exit_reason::user_shutdown); // the last, did not ask
  run();
  EXPECT_EQ(s->live(), 1u);
  EXPECT_EQ(count("delete"), 0);
  auto [third, third_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, third, true)->value);
  EXPECT_EQ(third_got->events.size(), 1u);
  caf::anon_send_exit(third, caf::exit_reason::user_shutdown); // the last, and asked
  run();
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(count("delete sb-1"), 1);
  auto [late, late_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, late)->value);
  expect_well_formed(late_got->events, id);
  EXPECT_EQ(late_got->events.back().message, "run cancelled: the last subscriber disconnected");
  EXPECT_EQ(late_got->events.back().code, ec::cancelled);
}

TEST_F(coordinator_test, admission_queues_then_refuses_at_once_and_starts_the_queue_in_order) {
  opts.settings.max_inflight = 1;
  opts.settings.max_queued = 1;
  s->calls["stream"] = {call_script::mode::hang, ec::transient, 1}; // the first run hangs
  boot();
  auto first = start();
  auto [sub, got] = subscriber();
  auto second = start(sub);
  auto third = ask<std::string>(run_atom::value, hello());
  ASSERT_TRUE(third->error);
  EXPECT_EQ(third->error->code, ec::capacity);
  EXPECT_NE(third->error->message.find("GUESTFLOW_MAX_QUEUED"), std::string::npos);
  auto st = stats();
  EXPECT_EQ(st.inflight, 1u);
  EXPECT_EQ(st.queued, 1u);
  EXPECT_EQ(st.accepted, 2u);
  EXPECT_EQ(st.refused, 1u);
  EXPECT_EQ(count("create"), 1); // the queued run waits without a guest
  EXPECT_TRUE(got->events.empty());
  ASSERT_TRUE(ask<bool>(cancel_atom::value, first)->value);
  expect_well_formed(got->events, second);
  EXPECT_EQ(kinds(got->events), happy_kinds);
  EXPECT_EQ(count("create"), 2);
  EXPECT_EQ(s->live(), 0u);
  st = stats();
  EXPECT_EQ(st.inflight, 0u);
  EXPECT_EQ(st.queued, 0u);
  EXPECT_EQ(st.finished, 2u);
}

TEST_F(coordinator_test, a_run_ends_before_its_guests_delete_which_keeps_its_slot) {
  opts.settings.max_inflight = 1;
  opts.settings.max_queued = 0;
  s->calls["delete"] = {call_script::mode::hang, ec::transient, 1}; // never answered
  boot();
  auto [sub, got] = subscriber();
  auto first = start(sub);
  // The run's outcome is out while its guest is still being deleted ...
  expect_well_formed(got->events, first);
  EXPECT_EQ(kinds(got->events), happy_kinds);
  EXPECT_EQ(got->live_guests_at_terminal, std::vector<size_t>{1});
  EXPECT_EQ(s->live(), 1u);
  // ... and the guest still holds the slot: the next run waits for it (no queue place is
  // configured, and it is not refused) instead of creating a guest beside it.
  EXPECT_EQ(stats().inflight, 1u);
  auto [sub2, got2] = subscriber();
  auto second = start(sub2);
  EXPECT_EQ(stats().queued, 1u);
  EXPECT_EQ(count("create"), 1);
  EXPECT_TRUE(got2->events.empty());
  // The delete's answer never comes: past its timeout the reaper owes the guest, the
  // execution ends and the slot goes to the waiting run.
  advance(151s);
  for (int k = 0; k < 5 && s->deletes_of_name(s->guests[0].name) == 0; ++k)
    advance(30s);
  EXPECT_EQ(s->deletes_of_name(s->guests[0].name), 1);
  expect_well_formed(got2->events, second);
  EXPECT_EQ(kinds(got2->events), happy_kinds);
  EXPECT_EQ(s->live(), 0u);
  auto st = stats();
  EXPECT_EQ(st.inflight, 0u);
  EXPECT_EQ(st.refused, 0u);
  EXPECT_EQ(st.finished, 2u);
}

TEST_F(coordinator_test, cancelling_a_queued_run_ends_it_without_a_guest) {
  opts.settings.max_inflight = 1;
  opts.settings.max_queued = 5;
  s->calls["stream"] = {call_script::mode::hang, ec::transient, 1};
  boot();
  start();
  auto [sub, got] = subscriber();
  auto queued = start(sub);
  ASSERT_TRUE(ask<bool>(cancel_atom::value, queued)->value);
  expect_well_formed(got->events, queued);
  EXPECT_EQ(got->events.back().type, ek::error);
  EXPECT_EQ(count("create"), 1);
  EXPECT_EQ(stats().queued, 0u);
}

TEST_F(coordinator_test, a_garbage_frame_stream_ends_with_exactly_one_error) {
  s->stream_lines = frames({"garbage", "{not json", start_a});
  auto evs = run_to_end();
  EXPECT_EQ(kinds(evs),
            (std::vector<ek>{ek::stdout_line, ek::stdout_line, ek::vertex_started, ek::error}));
  EXPECT_EQ(evs.back().code, ec::guest_failed);
  EXPECT_NE(evs.back().message.find("without a done frame"), std::string::npos);
}

TEST_F(coordinator_test, a_truncated_frame_stream_ends_with_exactly_one_error) {
  s->stream_lines = frames({start_a});
  s->stream_lines.push_back(chunk(built_a.substr(0, 40))); // killed mid-line
  s->stream_exit = 1;
  auto evs = run_to_end();
  EXPECT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs.back().code, ec::guest_failed);
  EXPECT_NE(evs.back().message.find("middle of a frame"), std::string::npos);
}

TEST_F(coordinator_test, a_runner_fatal_is_the_error) {
  s->stream_lines =
      frames({start_a, R"({"t":"fatal","error":"invalid spec: no nodes","traceback":""})"});
  s->stream_exit = 1;
  auto evs = run_to_end();
  EXPECT_EQ(evs.back().code, ec::guest_failed);
  EXPECT_EQ(evs.back().message, "invalid spec: no nodes");
}

TEST_F(coordinator_test, a_timed_out_run_ends_with_timeout) {
  s->stream_lines = frames({start_a});
  s->stream_exit = 124; // timeout(1)
  auto evs = run_to_end();
  EXPECT_EQ(evs.back().code, ec::timeout);
  EXPECT_NE(evs.back().message.find("600 s limit"), std::string::npos);
}

TEST_F(coordinator_test, a_refused_create_ends_with_its_code_and_leaves_nothing) {
  s->calls["create"] = {call_script::mode::fail, ec::unavailable, 1};
  auto evs = run_to_end();
  EXPECT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs.back().code, ec::unavailable);
  EXPECT_EQ(evs.back().message, "scripted create failure");
  EXPECT_EQ(count("delete"), 0);
}

TEST_F(coordinator_test, an_oversize_line_stops_the_guest_and_says_why) {
  opts.run.frames.max_line = 256;
  s->calls["stream"] = {call_script::mode::hang, ec::transient, 1}; // it would print forever
  s->stream_lines = frames({start_a});
  for (int i = 0; i < 8; ++i)
    s->stream_lines.push_back(chunk(std::string(100, 'x')));
  auto evs = run_to_end();
  EXPECT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs.back().code, ec::guest_failed);
  EXPECT_NE(evs.back().message.find("longer than 256 bytes"), std::string::npos);
  EXPECT_EQ(count("cancel"), 1);
}

TEST_F(coordinator_test, a_late_joiner_past_the_replay_buffer_gets_one_error) {
  opts.run.replay_bytes = 2048;
  s->stream_lines.clear();
  for (int i = 0; i < 100; ++i)
    s->stream_lines.push_back(chunk("line " + std::to_string(i) + std::string(40, '.') + "\n"));
  s->stream_lines.push_back(chunk(done + "\n"));
  boot();
  auto [live, live_got] = subscriber();
  auto id = start(live);
  expect_well_formed(live_got->events, id); // live subscribers lose nothing
  EXPECT_EQ(live_got->events.size(), 101u);
  auto [late, late_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, late)->value);
  ASSERT_EQ(late_got->events.size(), 1u);
  EXPECT_EQ(late_got->events[0].type, ek::error);
  EXPECT_EQ(late_got->events[0].code, ec::capacity);
  EXPECT_NE(late_got->events[0].message.find("evicted"), std::string::npos);
  auto [tail, tail_got] = subscriber();
  ASSERT_TRUE(subscribe(id, 98, tail)->value);
  expect_well_formed(tail_got->events, id, 98);
  EXPECT_EQ(tail_got->events.size(), 3u);
}

TEST_F(coordinator_test, bad_input_is_refused_and_starts_nothing) {
  opts.settings.timeout_seconds = 60;
  boot();
  auto r = hello();
  r.inputs = raw_json{"42"};
  auto bad = ask<std::string>(run_atom::value, r);
  ASSERT_TRUE(bad->error);
  EXPECT_EQ(bad->error->code, ec::bad_request);
  EXPECT_NE(bad->error->message.find("inputs"), std::string::npos);
  auto slow = hello();
  slow.timeout_seconds = 61;
  bad = ask<std::string>(run_atom::value, slow);
  ASSERT_TRUE(bad->error);
  EXPECT_EQ(bad->error->code, ec::bad_request);
  EXPECT_TRUE(s->log.empty());
  auto st = stats();
  EXPECT_EQ(st.accepted, 0u);
  EXPECT_EQ(st.runs, 0u);
}

TEST_F(coordinator_test, a_finished_run_stays_joinable_for_its_retention_then_goes) {
  opts.run.retention = 60s;
  boot();
  auto id = start();
  advance(59s);
  auto [sub, got] = subscriber();
  ASSERT_TRUE(subscribe(id, 0, sub)->value);
  EXPECT_EQ(got->events.size(), 6u);
  advance(2s);
  EXPECT_EQ(stats().runs, 0u);
  auto gone = subscribe(id, 0, sub);
  ASSERT_TRUE(gone->error);
  EXPECT_EQ(gone->error->code, ec::not_found);
}

TEST_F(coordinator_test, past_the_retention_budget_the_oldest_ended_runs_go_before_their_time) {
  opts.run.retention = 60s;
  opts.settings.retention_bytes = 5000; // room for one ended run of this flow, not two
  boot();
  auto [sub, got] = subscriber();
  auto first = start();
  ASSERT_TRUE(subscribe(first, 0, sub)->value) << "alone within the budget, it stays";
  auto second = start();
  auto gone = subscribe(first, 0, sub);
  ASSERT_TRUE(gone->error) << "the oldest went to make room";
  EXPECT_EQ(gone->error->code, ec::not_found);
  auto [sub2, got2] = subscriber();
  ASSERT_TRUE(subscribe(second, 0, sub2)->value);
  EXPECT_EQ(got2->events.size(), 6u) << "the newest is whole";
  EXPECT_EQ(stats().runs, 1u);
  advance(61s);
  EXPECT_EQ(stats().runs, 0u); // and the time limit still holds for the rest
}

TEST_F(coordinator_test, runs_within_the_retention_budget_all_stay_joinable) {
  opts.run.retention = 60s;
  boot();
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i)
    ids.push_back(start());
  for (auto& id : ids) {
    auto [sub, got] = subscriber();
    EXPECT_TRUE(subscribe(id, 0, sub)->value) << id;
  }
  advance(61s);
  EXPECT_EQ(stats().runs, 0u);
  // Runs that went by time leave no bookkeeping behind: a full budget's worth later, the
  // newest run is still joinable.
  auto last = start();
  auto [sub, got] = subscriber();
  EXPECT_TRUE(subscribe(last, 0, sub)->value);
}

TEST_F(coordinator_test, stopping_the_coordinator_cancels_running_runs) {
  auto [id, sub, got] = hung_run();
  caf::anon_send_exit(co, caf::exit_reason::user_shutdown);
  run();
  expect_well_formed(got->events, id);
  EXPECT_EQ(got->events.back().message, "run cancelled: the server is shutting down");
  EXPECT_EQ(got->events.back().code, ec::unavailable);
  EXPECT_EQ(s->live(), 0u);
}
