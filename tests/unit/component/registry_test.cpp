// Reusable guests under the deterministic scheduler with the scripted control plane:
// the registry's per-name queue, adoption (also after a lost create race), resume of
// paused guests, the egress guard, returned files, and the reusable sweep.

#include "actors/execution.hpp"
#include "actors/guest_names.hpp"
#include "actors/guest_registry.hpp"
#include "actors/lifecycle.hpp"
#include "actors/reaper.hpp"
#include "tar_builder.hpp"
#include "tests/unit/actors/deterministic.hpp"
#include "tests/unit/actors/scripted_controlplane.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <ctime>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

const std::string key = names::reusable("flow-1", "comp-1", "none");

class component_test : public deterministic {
protected:
  std::shared_ptr<script> s = std::make_shared<script>();
  controlplane_actor cp;
  reaper_actor rp;
  lifecycle_actor lc;
  guest_registry_actor reg;
  std::vector<caf::actor> callers;
  std::vector<execution_actor> execs;

  void SetUp() override {
    cp = sys.spawn(scripted_controlplane, s);
    reaper_options ro;
    ro.owner = "abc123";
    rp = sys.spawn(reaper, cp, ro);
    lc = sys.spawn(lifecycle, cp, lifecycle_options{});
    reg = sys.spawn(guest_registry, cp, lc, guest_registry_options{});
    s->exec_reply.stdout_text = "1\n";
    run();
  }

  void TearDown() override {
    for (auto& c : callers)
      caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    for (auto& e : execs) // one still waiting for an answer would keep the system alive
      caf::anon_send_exit(e, caf::exit_reason::user_shutdown);
    for (auto a : {caf::actor_cast<caf::actor>(reg), caf::actor_cast<caf::actor>(lc),
                   caf::actor_cast<caf::actor>(rp), caf::actor_cast<caf::actor>(cp)})
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    run();
  }

  static execution_spec spec(const std::string& name = key,
                             egress_policy egress = egress_policy::deny_all()) {
    execution_spec sp;
    sp.name = name;
    sp.create.shape = "s-1vcpu-256mb";
    sp.create.name = name;
    sp.create.egress = egress;
    sp.uploads.push_back({"/workspace/main_00.py", "print(1)"});
    sp.command.cmd = "timeout";
    sp.command.args = {"--signal=KILL", "5", "python3", "/workspace/main_00.py"};
    sp.timeout_seconds = 5;
    return sp;
  }

  execution_options reusable() const {
    execution_options o;
    o.registry = reg;
    o.lifecycle = lc;
    return o;
  }

  static std::shared_ptr<const collect_options> collect(uint64_t cap = 1 << 20) {
    collect_options c;
    c.archive = "/workspace/.gf-artifacts-t.tar";
    c.cap_bytes = cap;
    return std::make_shared<const collect_options>(std::move(c));
  }

  std::shared_ptr<run_outcome> start(execution_spec sp, execution_options opts,
                                     execution_actor* exec_out = nullptr) {
    auto out = std::make_shared<run_outcome>();
    auto exec = sys.spawn(execution, cp, rp, std::move(opts));
    execs.push_back(exec);
    if (exec_out) *exec_out = exec;
    auto caller = sys.spawn([exec, sp, out](caf::event_based_actor* self) {
      self->request(exec, std::chrono::seconds{3600}, run_atom::value, sp)
          .then([out](execution_report& r) { out->report = std::move(r); },
                [out](caf::error& e) { out->error = to_failure(e); });
    });
    callers.push_back(caller);
    run();
    return out;
  }

  std::shared_ptr<run_outcome> start(execution_spec sp = spec()) {
    return start(std::move(sp), reusable());
  }

  fake_guest existing(const std::string& id, sandbox_status status,
                      egress_policy egress = egress_policy::deny_all()) {
    fake_guest g;
    g.id = id;
    g.name = key;
    g.status = status;
    g.egress = egress;
    return g;
  }

  /// Log index of the first line equal to `line` (or the log's size).
  size_t at(const std::string& line) const {
    for (size_t i = 0; i < s->log.size(); ++i)
      if (s->log[i] == line) return i;
    return s->log.size();
  }
};

std::string rfc3339(std::time_t t) {
  char buf[32];
  std::tm tm{};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

} // namespace

TEST_F(component_test, reusable_guest_survives_the_run_and_the_next_run_adopts_it) {
  auto first = start();
  ASSERT_TRUE(first->report) << first->error->message;
  EXPECT_EQ(first->report->guest_id, "sb-1");
  EXPECT_EQ(first->report->result.stdout_text, "1\n");
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("delete "), 0);
  EXPECT_EQ(s->live(), 1u);
  // What the runtime put there is removed; the guest is not.
  ASSERT_EQ(s->exec_cmds.size(), 2u);
  EXPECT_EQ(s->exec_cmds[1], (exec_request{"rm", {"-f", "--", "/workspace/main_00.py"}}));
  auto second = start();
  ASSERT_TRUE(second->report);
  EXPECT_EQ(second->report->guest_id, "sb-1");
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("delete "), 0);
  // The reaper never heard of it: nothing to delete at shutdown either.
  auto st = std::make_shared<reaper_stats>();
  sys.spawn([this, st](caf::event_based_actor* self) {
    self->request(rp, std::chrono::seconds{3600}, stats_atom::value)
        .then([st](reaper_stats& x) { *st = x; }, [](caf::error&) {});
  });
  run();
  EXPECT_EQ(st->tracked, 0u);
  EXPECT_EQ(st->created, 0u);
}

TEST_F(component_test, two_concurrent_runs_for_one_key_create_once_and_run_in_turn) {
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1}; // the first run's program
  auto a = start();
  auto b = start();
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("exec "), 1); // b waits in the queue: it has not touched the guest
  EXPECT_EQ(s->count("put "), 1);
  EXPECT_FALSE(a->answered());
  EXPECT_FALSE(b->answered());
  advance(5s + 30s + 11s); // a's host backstop: a fails, releases, and b gets the guest
  ASSERT_TRUE(a->error);
  ASSERT_TRUE(b->report) << (b->error ? b->error->message : "");
  EXPECT_EQ(b->report->guest_id, "sb-1");
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("put sb-1"), 2);
  EXPECT_EQ(s->count("delete "), 0);
  EXPECT_EQ(s->live(), 1u);
}

TEST_F(component_test, a_holder_that_dies_hands_the_guest_to_the_next_run) {
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1};
  execution_actor first;
  start(spec(), reusable(), &first);
  auto b = start();
  EXPECT_FALSE(b->answered());
  caf::anon_send_exit(first, caf::exit_reason::user_shutdown);
  run();
  ASSERT_TRUE(b->report);
  EXPECT_EQ(b->report->guest_id, "sb-1");
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("delete "), 0);
}

TEST_F(component_test, a_create_lost_to_another_process_adopts_the_winner) {
  s->appear_on_create = existing("other-1", sandbox_status::creating);
  auto r = start();
  for (int i = 0; i < 10 && !r->answered(); ++i)
    advance(250ms); // the winner's create is still in flight: poll until it runs
  ASSERT_TRUE(r->report) << r->error->message;
  EXPECT_EQ(r->report->guest_id, "other-1");
  EXPECT_EQ(s->count("create "), 1);
  EXPECT_EQ(s->count("list"), 2); // the lookup before the create, and the one after the 409
  EXPECT_EQ(s->live(), 1u);
}

TEST_F(component_test, a_create_refused_for_another_reason_stays_refused) {
  s->calls["create"] = {call_script::mode::fail, ec::bad_request, 1};
  auto r = start();
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::bad_request);
  EXPECT_EQ(s->live(), 0u);
  // The queue moved on: the next run creates the guest.
  auto next = start();
  ASSERT_TRUE(next->report);
}

TEST_F(component_test, paused_guest_is_resumed_and_running_before_any_file_access) {
  s->guests.push_back(existing("sb-p", sandbox_status::paused));
  auto r = start();
  ASSERT_TRUE(r->report) << r->error->message;
  EXPECT_EQ(r->report->guest_id, "sb-p");
  EXPECT_EQ(s->count("create "), 0);
  EXPECT_EQ(s->count("resume sb-p"), 1);
  EXPECT_LT(at("resume sb-p"), at("put sb-p /workspace/main_00.py"));
  EXPECT_LT(at("egress sb-p"), at("resume sb-p")); // egress is checked before waking it
}

TEST_F(component_test, a_slow_resume_is_polled_until_running) {
  s->guests.push_back(existing("sb-p", sandbox_status::paused));
  s->resume_to = sandbox_status::resuming;
  auto r = start();
  EXPECT_FALSE(r->answered());
  for (int i = 0; i < 10 && !r->answered(); ++i)
    advance(250ms);
  ASSERT_TRUE(r->report);
  EXPECT_GE(s->count("get sb-p"), 2);
}

TEST_F(component_test, a_guest_stuck_between_states_fails_after_the_deadline) {
  s->guests.push_back(existing("sb-p", sandbox_status::pausing));
  auto r = start();
  for (int i = 0; i < 200 && !r->answered(); ++i)
    advance(1s);
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::transient);
  EXPECT_NE(r->error->message.find("pausing"), std::string::npos) << r->error->message;
  EXPECT_EQ(s->count("put "), 0);
}

TEST_F(component_test, paused_mid_run_resumes_and_retries_the_call_once) {
  s->calls["exec"] = {call_script::mode::fail, ec::paused, 1};
  auto r = start();
  ASSERT_TRUE(r->report) << r->error->message;
  EXPECT_EQ(r->report->result.stdout_text, "1\n");
  EXPECT_EQ(s->count("resume sb-1"), 1);
  EXPECT_EQ(s->count("exec sb-1"), 3); // refused, retried, then the cleanup
  s->calls["put"] = {call_script::mode::fail, ec::paused, 1};
  auto again = start();
  ASSERT_TRUE(again->report);
  EXPECT_EQ(s->count("resume sb-1"), 2);
}

TEST_F(component_test, paused_twice_in_one_call_fails_paused_without_deleting) {
  s->calls["exec"] = {call_script::mode::fail, ec::paused, 2};
  auto r = start();
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::paused);
  EXPECT_EQ(s->count("resume sb-1"), 1); // once, not in a loop
  EXPECT_EQ(s->count("delete "), 0);
  EXPECT_EQ(s->live(), 1u);
}

TEST_F(component_test, drifted_egress_is_refused_not_resumed_and_not_deleted) {
  s->guests.push_back(existing("sb-d", sandbox_status::paused, egress_policy::allow_all()));
  auto r = start();
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::egress_drift);
  EXPECT_NE(r->error->message.find("sb-d"), std::string::npos);
  EXPECT_EQ(s->count("resume "), 0);
  EXPECT_EQ(s->count("put "), 0);
  EXPECT_EQ(s->count("exec "), 0);
  EXPECT_EQ(s->count("delete "), 0);
  EXPECT_EQ(s->count("create "), 0);
  EXPECT_EQ(s->live(), 1u);
}

TEST_F(component_test, a_gvisor_run_never_adopts_a_weaker_guest_of_its_name) {
  s->guests.push_back(existing("sb-n", sandbox_status::running));
  auto sp = spec();
  sp.create.isolation = "gvisor";
  auto r = start(sp);
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::policy_refused);
  EXPECT_NE(r->error->message.find("sb-n"), std::string::npos) << r->error->message;
  EXPECT_EQ(s->count("put "), 0);
  EXPECT_EQ(s->count("exec "), 0);
  EXPECT_EQ(s->count("delete "), 0);
  EXPECT_EQ(s->live(), 1u);
  s->guests.back().isolation = "gvisor"; // the same name as a gVisor guest: adopted
  auto again = start(sp);
  ASSERT_TRUE(again->report) << again->error->message;
  EXPECT_EQ(s->count("create "), 0);
}

TEST_F(component_test, the_registry_refuses_names_that_are_not_reusable) {
  auto r = start(spec("gf-b-abc123-aaaaaaaaaa"));
  ASSERT_TRUE(r->error);
  EXPECT_EQ(r->error->code, ec::bad_request);
  EXPECT_EQ(s->log.size(), 0u);
}

TEST_F(component_test, returned_files_come_back_and_the_archive_is_removed) {
  s->exec_replies = {exec_result{"out\n", "", 3, std::nullopt, 1}, exec_result{}};
  s->fetch_reply = tar_entry({"./", '5'}) + tar_entry({"./a b.txt ", '0', "A"}) +
                   tar_entry({"../../etc/x", '0', "evil"}) + end_of_archive();
  auto opts = reusable();
  opts.collect = collect();
  auto r = start(spec(), opts);
  ASSERT_TRUE(r->report) << r->error->message;
  EXPECT_EQ(r->report->result.exit_code, 3);
  EXPECT_EQ(r->report->result.stdout_text, "out\n");
  ASSERT_TRUE(r->report->files);
  const auto& f = *r->report->files;
  EXPECT_FALSE(f.error);
  ASSERT_EQ(f.files.size(), 1u);
  EXPECT_EQ(f.files[0], (returned_file{"a b.txt ", 1, "A"}));
  ASSERT_EQ(f.dropped.size(), 1u);
  EXPECT_EQ(f.dropped[0].path, "../../etc/x");
  ASSERT_EQ(s->exec_cmds.size(), 3u);
  EXPECT_EQ(
      s->exec_cmds[1].args,
      (std::vector<std::string>{"--kill-after=5", "120", "tar", "-C", "/workspace/artifacts",
                                "-cf", "/workspace/.gf-artifacts-t.tar", "--format=pax", "."}));
  EXPECT_EQ(s->count("fetch sb-1 /workspace/.gf-artifacts-t.tar"), 1);
  EXPECT_EQ(s->exec_cmds[2], (exec_request{"rm",
                                           {"-f", "--", "/workspace/main_00.py",
                                            "/workspace/.gf-artifacts-t.tar"}}));
}

TEST_F(component_test, an_archive_over_the_cap_keeps_the_runs_own_results) {
  s->exec_replies = {exec_result{"out\n", "err\n", 0, std::nullopt, 1}, exec_result{}};
  s->fetch_reply = std::string(5000, 'x');
  auto opts = reusable();
  opts.collect = collect(1000);
  auto r = start(spec(), opts);
  ASSERT_TRUE(r->report);
  EXPECT_EQ(r->report->result.stdout_text, "out\n");
  EXPECT_EQ(r->report->result.stderr_text, "err\n");
  ASSERT_TRUE(r->report->files && r->report->files->error);
  EXPECT_EQ(r->report->files->error->code, ec::artifact_too_large);
  EXPECT_TRUE(r->report->files->files.empty());
}

TEST_F(component_test, tar_failing_in_the_guest_is_reported_in_files) {
  s->exec_replies = {exec_result{"out\n", "", 0, std::nullopt, 1},
                     exec_result{"", "tar: boom", 2, std::nullopt, 1}};
  auto opts = reusable();
  opts.collect = collect();
  auto r = start(spec(), opts);
  ASSERT_TRUE(r->report);
  ASSERT_TRUE(r->report->files && r->report->files->error);
  EXPECT_EQ(r->report->files->error->code, ec::guest_failed);
  EXPECT_NE(r->report->files->error->message.find("boom"), std::string::npos);
  EXPECT_EQ(s->count("fetch "), 0);
}

TEST_F(component_test, an_ephemeral_run_with_returned_files_still_deletes_once) {
  s->exec_replies = {exec_result{"out\n", "", 0, std::nullopt, 1}, exec_result{}};
  s->fetch_reply = tar_entry({"f", '0', "F"}) + end_of_archive();
  execution_options opts;
  opts.collect = collect();
  auto r = start(spec("gf-b-abc123-aaaaaaaaaa"), opts);
  ASSERT_TRUE(r->report);
  ASSERT_TRUE(r->report->files);
  EXPECT_EQ(r->report->files->files.at(0).bytes, "F");
  EXPECT_EQ(s->count("delete "), 1);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->exec_cmds.size(), 2u); // program + tar: the delete removes the rest
}

TEST_F(component_test, sweep_deletes_idle_reusable_guests_only) {
  auto old_c = existing("sb-old", sandbox_status::paused);
  old_c.name = names::reusable("f", "old", "none");
  auto recent = existing("sb-new", sandbox_status::running);
  recent.name = names::reusable("f", "new", "none");
  recent.created_at = rfc3339(std::time(nullptr));
  fake_guest eph;
  eph.id = "sb-eph";
  eph.name = "gf-b-abc123-aaaaaaaaaa";
  s->guests = {old_c, recent, eph};
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1};
  auto held = start(); // key: created 2020 by the script, but held by this run
  ASSERT_EQ(s->count("create "), 1);
  auto n = std::make_shared<std::optional<result<uint64_t>>>();
  sys.spawn([this, n](caf::event_based_actor* self) {
    self->request(reg, std::chrono::seconds{3600}, sweep_atom::value, uint32_t{3600})
        .then([n](uint64_t x) { n->emplace(x); },
              [n](caf::error& e) { n->emplace(to_failure(e)); });
  });
  run();
  ASSERT_TRUE(*n && **n);
  EXPECT_EQ(***n, 1u);
  EXPECT_EQ(s->count("delete "), 1);
  EXPECT_EQ(s->count("delete sb-old"), 1);
}
