#include "actors/reaper.hpp"
#include "deterministic.hpp"
#include "scripted_controlplane.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

class reaper_test : public deterministic {
protected:
  std::shared_ptr<script> s = std::make_shared<script>();
  controlplane_actor cp;
  reaper_actor rp;

  void SetUp() override {
    cp = sys.spawn(scripted_controlplane, s);
    reaper_options ro;
    ro.owner = "abc123";
    rp = sys.spawn(reaper, cp, ro);
    run();
  }

  void TearDown() override {
    caf::anon_send_exit(cp, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(rp, caf::exit_reason::user_shutdown);
    run();
  }

  void add_guest(const std::string& name, const std::string& created_at) {
    s->guests.push_back({"sb-" + std::to_string(++s->next_id), name, created_at, 0});
  }

  /// Sends a request whose answer lands in the returned slot once the scheduler runs it.
  template<class R, class... Ts>
  std::shared_ptr<std::optional<R>> request(Ts... xs) {
    auto out = std::make_shared<std::optional<R>>();
    sys.spawn([this, out, xs...](caf::event_based_actor* self) {
      self->request(rp, std::chrono::seconds{3600}, xs...)
          .then([out](R& r) { *out = r; }, [](caf::error&) {});
    });
    return out;
  }

  template<class R, class... Ts>
  std::optional<R> ask(Ts... xs) {
    auto out = request<R>(xs...);
    run();
    return *out;
  }
};

} // namespace

TEST_F(reaper_test, sweep_deletes_only_its_own_old_untracked_ephemeral_guests) {
  add_guest("gf-b-abc123-old0000000", "2020-01-01T00:00:00Z");     // ours, old → deleted
  add_guest("gf-x-abc123-old1111111", "2020-01-01T00:00:00.123Z"); // ours, old → deleted
  add_guest("gf-b-zzz999-old2222222", "2020-01-01T00:00:00Z");     // another runtime's
  add_guest("gf-c-abc123-reuse00000", "2020-01-01T00:00:00Z");     // reusable: never swept
  add_guest("gf-b-abc123-new3333333", "2999-01-01T00:00:00Z");     // too young
  add_guest("my-own-sandbox", "2020-01-01T00:00:00Z");             // not guestflow's at all
  auto n = ask<uint64_t>(sweep_atom::value, uint32_t{60});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 2u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-old0000000"), 1);
  EXPECT_EQ(s->deletes_of_name("gf-x-abc123-old1111111"), 1);
  EXPECT_EQ(s->deletes_of_name("gf-b-zzz999-old2222222"), 0);
  EXPECT_EQ(s->deletes_of_name("gf-c-abc123-reuse00000"), 0);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-new3333333"), 0);
  EXPECT_EQ(s->deletes_of_name("my-own-sandbox"), 0);
}

TEST_F(reaper_test, sweep_skips_guests_a_live_execution_tracks) {
  add_guest("gf-b-abc123-live000000", "2020-01-01T00:00:00Z");
  // A live owner (this test's anonymous actor) tracks the name.
  auto owner = sys.spawn([this](caf::event_based_actor* self) -> caf::behavior {
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-live000000"});
    return {[](int) {}};
  });
  run();
  auto n = ask<uint64_t>(sweep_atom::value, uint32_t{0});
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_EQ(s->live(), 1u);
  // …until that owner dies without releasing it.
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  run();
  EXPECT_EQ(s->live(), 0u);
}

TEST_F(reaper_test, a_sweep_whose_list_fails_lists_again) {
  // A restarted runtime's start-up sweep: one failed list (a 5xx, a cut answer) must not
  // leave the dead predecessor's guests behind until the next start.
  add_guest("gf-b-abc123-orphan0000", "2020-01-01T00:00:00Z");
  s->calls["list"] = {call_script::mode::fail, ec::unavailable, 2};
  auto out = std::make_shared<std::optional<uint64_t>>();
  sys.spawn([this, out](caf::event_based_actor* self) {
    self->request(rp, std::chrono::seconds{3600}, sweep_atom::value, uint32_t{0})
        .then([out](uint64_t n) { *out = n; }, [](caf::error&) {});
  });
  run();
  EXPECT_EQ(s->count("list"), 1);
  EXPECT_FALSE(*out);
  for (int i = 0; i < 10 && !*out; ++i)
    advance(1s);
  ASSERT_TRUE(*out);
  EXPECT_EQ(**out, 1u);
  EXPECT_EQ(s->count("list"), 3);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-orphan0000"), 1);
}

TEST_F(reaper_test, a_drain_answers_a_sweep_waiting_to_list_again) {
  // Shutting down: a sweep waiting for its retry answers with its error; the drain does
  // not wait for it.
  s->calls["list"] = {call_script::mode::fail, ec::unavailable, 100};
  auto failed = std::make_shared<bool>(false);
  sys.spawn([this, failed](caf::event_based_actor* self) {
    self->request(rp, std::chrono::seconds{3600}, sweep_atom::value, uint32_t{0})
        .then([](uint64_t) {}, [failed](caf::error&) { *failed = true; });
  });
  run();
  EXPECT_FALSE(*failed);
  auto n = ask<uint64_t>(drain_atom::value);
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 0u);
  EXPECT_TRUE(*failed);
  EXPECT_EQ(s->count("list"), 1);
}

TEST_F(reaper_test, drain_deletes_every_tracked_guest) {
  add_guest("gf-b-abc123-drain00000", "2020-01-01T00:00:00Z");
  add_guest("gf-x-abc123-drain11111", "2020-01-01T00:00:00Z");
  auto owner = sys.spawn([this](caf::event_based_actor* self) -> caf::behavior {
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-drain00000"});
    self->send(rp, created_atom::value, std::string{"gf-b-abc123-drain00000"},
               std::string{"sb-1"});
    self->send(rp, track_atom::value, std::string{"gf-x-abc123-drain11111"});
    return {[](int) {}};
  });
  run();
  auto pending = ask<uint64_t>(drain_atom::value);
  ASSERT_TRUE(pending);
  EXPECT_EQ(*pending, 0u);
  EXPECT_EQ(s->live(), 0u);
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(reaper_test, drain_waits_for_a_sweep_still_listing) {
  add_guest("gf-b-abc123-orphan0000", "2020-01-01T00:00:00Z");
  // A start-up sweep, then at once the drain of a short run's exit: the drain must not
  // answer before the sweep's list has answered and what it found is deleted.
  auto deleted_when_drained = std::make_shared<std::optional<int>>();
  sys.spawn([this, deleted_when_drained](caf::event_based_actor* self) {
    self->request(rp, std::chrono::seconds{3600}, sweep_atom::value, uint32_t{60})
        .then([](uint64_t) {}, [](caf::error&) {});
    self->request(rp, std::chrono::seconds{3600}, drain_atom::value)
        .then(
            [this, deleted_when_drained](uint64_t) {
              *deleted_when_drained = s->deletes_of_name("gf-b-abc123-orphan0000");
            },
            [](caf::error&) {});
  });
  run();
  ASSERT_TRUE(*deleted_when_drained);
  EXPECT_EQ(**deleted_when_drained, 1);
}

TEST_F(reaper_test, drain_answers_at_its_deadline_with_what_is_still_pending) {
  add_guest("gf-b-abc123-stuck00000", "2020-01-01T00:00:00Z");
  s->calls["delete"] = {call_script::mode::fail, ec::unavailable, -1};
  auto owner = sys.spawn([this](caf::event_based_actor* self) -> caf::behavior {
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-stuck00000"});
    self->send(rp, created_atom::value, std::string{"gf-b-abc123-stuck00000"},
               std::string{"sb-1"});
    return {[](int) {}};
  });
  run();
  auto out = request<uint64_t>(drain_atom::value);
  run();
  EXPECT_FALSE(*out);
  for (int i = 0; i < 20 && !*out; ++i)
    advance(5s);
  ASSERT_TRUE(*out);
  EXPECT_EQ(**out, 1u);
  auto st = ask<reaper_stats>(stats_atom::value);
  ASSERT_TRUE(st);
  EXPECT_GE(st->failed_deletes, 2u);
  EXPECT_EQ(st->pending, 1u);
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  run();
}

TEST_F(reaper_test, lost_create_that_never_materializes_is_given_up_after_the_watch) {
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(rp, reap_atom::value, std::string{"gf-b-abc123-ghost00000"});
  });
  run();
  auto st = ask<reaper_stats>(stats_atom::value);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->pending, 1u);
  // It keeps looking (a lost create may still appear) …
  add_guest("gf-b-abc123-ghost00000", "2020-01-01T00:00:00Z");
  for (int i = 0; i < 10 && s->live() > 0; ++i)
    advance(30s);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-ghost00000"), 1);
  st = ask<reaper_stats>(stats_atom::value);
  EXPECT_EQ(st->pending, 0u);
}

TEST_F(reaper_test, a_drain_gives_up_a_lost_create_a_list_shows_absent) {
  // A create that failed while the control plane was down (its owner reaped the name): at
  // the drain, one list that shows no such guest ends the wait. It used to be watched for
  // lost_create_watch, so serve's stop waited out the drain's 60 s deadline.
  sys.spawn([this](caf::event_based_actor* self) { // the execution, which then ends
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-downcp0000"});
    self->send(rp, reap_atom::value, std::string{"gf-b-abc123-downcp0000"});
  });
  run();
  advance(3s); // a few lookup rounds: the name is watched (backoff), not given up
  auto st = ask<reaper_stats>(stats_atom::value);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->pending, 1u);
  auto lists = s->count("list");
  auto out = request<uint64_t>(drain_atom::value);
  run(); // no time passes: the drain looks at once
  ASSERT_TRUE(*out) << "the drain waited for a create that made nothing";
  EXPECT_EQ(**out, 0u);
  EXPECT_EQ(s->count("list"), lists + 1);
  EXPECT_EQ(s->count("delete"), 0);
}

TEST_F(reaper_test, a_drain_still_watches_a_create_its_dead_owner_left_in_flight) {
  // The owner died with its create out (no reap): the guest may appear after a list, so the
  // drain waits for it (until its deadline) and deletes it when it does.
  auto owner = sys.spawn([this](caf::event_based_actor* self) -> caf::behavior {
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-inflight00"});
    return {[](int) {}};
  });
  run();
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
  run();
  auto out = request<uint64_t>(drain_atom::value);
  run();
  EXPECT_FALSE(*out);
  add_guest("gf-b-abc123-inflight00", "2999-01-01T00:00:00Z");
  for (int i = 0; i < 20 && !*out; ++i)
    advance(1s);
  ASSERT_TRUE(*out);
  EXPECT_EQ(**out, 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-inflight00"), 1);
}

TEST_F(reaper_test, failed_deletes_counts_failed_deletes_only) {
  // A name whose create answer was lost is looked up by listing; a list that fails is not a
  // failed delete.
  add_guest("gf-b-abc123-lost000000", "2020-01-01T00:00:00Z");
  s->calls["list"] = {call_script::mode::fail, ec::unavailable, 1};
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(rp, reap_atom::value, std::string{"gf-b-abc123-lost000000"});
  });
  run();
  EXPECT_EQ(s->count("list"), 1);
  EXPECT_EQ(s->count("delete"), 0);
  auto st = ask<reaper_stats>(stats_atom::value);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->failed_deletes, 0u);
  EXPECT_EQ(st->pending, 1u);
  // The lookup is retried and finds it; its first delete fails (counted), the next works.
  s->calls["delete"] = {call_script::mode::fail, ec::unavailable, 1};
  for (int i = 0; i < 20 && s->live() > 0; ++i)
    advance(1s);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-lost000000"), 1);
  EXPECT_EQ(s->count("delete"), 2);
  st = ask<reaper_stats>(stats_atom::value);
  ASSERT_TRUE(st);
  EXPECT_EQ(st->failed_deletes, 1u);
  EXPECT_EQ(st->pending, 0u);
}

TEST_F(reaper_test, a_retry_due_sooner_is_not_held_back_by_a_later_one) {
  // A: a lost create nobody ever sees; every lookup round doubles its wait up to the
  // 30 s cap (rounds at 1, 3, 7, 15, 31 s; the next one is due at 61 s).
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(rp, reap_atom::value, std::string{"gf-b-abc123-never00000"});
  });
  run();
  for (auto wait : {1s, 2s, 4s, 8s, 16s})
    advance(wait);
  ASSERT_EQ(s->count("list"), 6); // the first lookup and five rounds: A now waits 30 s
  // B: known id, its delete fails once and is due again after 1 s — not after A's 30 s.
  add_guest("gf-b-abc123-soon000000", "2020-01-01T00:00:00Z");
  s->calls["delete"] = {call_script::mode::fail, ec::unavailable, 1};
  sys.spawn([this](caf::event_based_actor* self) {
    self->send(rp, track_atom::value, std::string{"gf-b-abc123-soon000000"});
    self->send(rp, created_atom::value, std::string{"gf-b-abc123-soon000000"},
               std::string{"sb-1"});
    self->send(rp, reap_atom::value, std::string{"gf-b-abc123-soon000000"});
  });
  run();
  EXPECT_EQ(s->count("delete"), 1);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-soon000000"), 0);
  advance(2s);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-soon000000"), 1);
  EXPECT_EQ(s->count("list"), 6); // A's own round is still to come
}

TEST(rfc3339, parses_utc_forms_and_refuses_others) {
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:01:00Z"), 60);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:01:00.999Z"), 60);
  EXPECT_EQ(parse_rfc3339("1970-01-01T00:01:00+00:00"), 60);
  EXPECT_FALSE(parse_rfc3339("yesterday"));
  EXPECT_FALSE(parse_rfc3339("1970-01-01T00:01:00+02:00"));
}
