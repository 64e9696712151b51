#include "actors/execution.hpp"
#include "actors/reaper.hpp"
#include "deterministic.hpp"
#include "scripted_controlplane.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>

using namespace guestflow;
using namespace guestflow::test;
using namespace std::chrono_literals;

namespace {

class execution_test : public deterministic {
protected:
  std::shared_ptr<script> s = std::make_shared<script>();
  controlplane_actor cp;
  reaper_actor rp;
  std::shared_ptr<run_outcome> out = std::make_shared<run_outcome>();

  void SetUp() override {
    cp = sys.spawn(scripted_controlplane, s);
    reaper_options ro;
    ro.owner = "abc123";
    ro.lost_create_watch = 120s;
    rp = sys.spawn(reaper, cp, ro);
    s->exec_reply.stdout_text = "hi\n";
    s->exec_reply.exit_code = 0;
    run();
  }

  std::vector<caf::actor> callers;

  void TearDown() override {
    // A caller whose execution died unanswered would keep the system alive forever.
    for (auto& c : callers)
      caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(cp, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(rp, caf::exit_reason::user_shutdown);
    run();
  }

  static execution_spec spec(const std::string& name, bool stream = false) {
    execution_spec sp;
    sp.name = name;
    sp.create.shape = "s-1vcpu-256mb";
    sp.create.name = name;
    sp.uploads.push_back({"/workspace/main_00.py", "print('hi')"});
    sp.command.cmd = "timeout";
    sp.command.args = {"--kill-after=5", "5", "python3", "/workspace/main_00.py"};
    sp.timeout_seconds = 5;
    sp.stream = stream;
    return sp;
  }

  /// Spawns an execution and a caller actor that requests the run; returns the caller.
  caf::actor start(execution_spec sp, execution_actor* exec_out = nullptr,
                   execution_options opts = {}) {
    auto exec = sys.spawn(execution, cp, rp, std::move(opts));
    if (exec_out) *exec_out = exec;
    auto o = out;
    auto caller = sys.spawn([exec, sp, o](caf::event_based_actor* self) {
      self->request(exec, std::chrono::seconds{3600}, run_atom::value, sp)
          .then([o](execution_report& r) { o->report = std::move(r); },
                [o](caf::error& e) { o->error = to_failure(e); });
    });
    run();
    callers.push_back(caller);
    return caller;
  }

  reaper_stats stats() {
    auto st = std::make_shared<reaper_stats>();
    auto probe = sys.spawn([this, st](caf::event_based_actor* self) {
      self->request(rp, std::chrono::seconds{3600}, stats_atom::value)
          .then([st](reaper_stats& x) { *st = x; }, [](caf::error&) {});
    });
    run();
    return *st;
  }

  int deletes() const {
    int n = 0;
    for (auto& line : s->log)
      n += line.rfind("delete ", 0) == 0;
    return n;
  }
};

} // namespace

TEST_F(execution_test, happy_path_creates_uploads_execs_and_deletes_once) {
  start(spec("gf-b-abc123-aaaaaaaaaa"));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.stdout_text, "hi\n");
  EXPECT_EQ(out->report->result.exit_code, 0);
  EXPECT_FALSE(out->report->outcome);
  ASSERT_EQ(s->log.size(), 4u);
  EXPECT_EQ(s->log[0], "create gf-b-abc123-aaaaaaaaaa");
  EXPECT_EQ(s->log[1], "put sb-1 /workspace/main_00.py");
  EXPECT_EQ(s->log[2], "exec sb-1");
  EXPECT_EQ(s->log[3], "delete sb-1");
  EXPECT_EQ(s->live(), 0u);
  auto st = stats();
  EXPECT_EQ(st.created, 1u);
  EXPECT_EQ(st.deleted, 1u);
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.tracked, 0u);
}

TEST_F(execution_test, a_caller_that_outlives_the_run_keeps_nothing_of_it) {
  auto exec = sys.spawn(execution, cp, rp, execution_options{});
  caf::actor_addr addr = exec.address(); // a weak reference of our own
  auto o = out;
  auto caller = sys.spawn([exec, o](caf::event_based_actor* self) -> caf::behavior {
    self->request(exec, std::chrono::seconds{3600}, run_atom::value,
                  spec("gf-b-abc123-llllllllll"))
        .then([o](execution_report& r) { o->report = std::move(r); },
              [o](caf::error& e) { o->error = to_failure(e); });
    return {[](int) {}}; // stays alive after the answer, like a long-lived surface
  });
  callers.push_back(caller);
  exec = nullptr;
  run();
  ASSERT_TRUE(out->report);
  // The execution monitored its caller (an attachable on the caller holding a weak
  // reference); it must take it back when it ends, or its memory lives as long as the caller.
  auto* ctrl = caf::actor_cast<caf::actor_control_block*>(addr);
  ASSERT_NE(ctrl, nullptr);
  EXPECT_EQ(ctrl->weak_refs.load(), 1u) << "only ours is left";
}

TEST_F(execution_test, a_cancel_before_the_run_creates_nothing) {
  auto exec = sys.spawn(execution, cp, rp, execution_options{});
  caf::anon_send(exec, cancel_atom::value); // e.g. a SIGTERM while the CLI was starting
  run();
  auto o = out;
  callers.push_back(sys.spawn([exec, o](caf::event_based_actor* self) {
    self->request(exec, std::chrono::seconds{3600}, run_atom::value,
                  spec("gf-b-abc123-nnnnnnnnnn"))
        .then([o](execution_report& r) { o->report = std::move(r); },
              [o](caf::error& e) { o->error = to_failure(e); });
  }));
  run();
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::cancelled);
  EXPECT_EQ(out->error->message, "run cancelled");
  EXPECT_TRUE(s->log.empty()) << "no call reached the control plane";
  EXPECT_EQ(stats().tracked, 0u);
}

TEST_F(execution_test, upload_failure_still_deletes_exactly_once) {
  s->calls["put"] = {call_script::mode::fail, ec::transient, 1};
  start(spec("gf-b-abc123-bbbbbbbbbb"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::transient);
  EXPECT_EQ(deletes(), 1);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-bbbbbbbbbb"), 1);
}

TEST_F(execution_test, exec_failure_still_deletes_exactly_once) {
  s->calls["exec"] = {call_script::mode::fail, ec::unavailable, 1};
  start(spec("gf-b-abc123-cccccccccc"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::unavailable) << out->error->message;
  EXPECT_EQ(deletes(), 1);
  EXPECT_EQ(s->live(), 0u);
}

TEST_F(execution_test, hung_exec_hits_the_host_backstop_and_deletes) {
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1};
  start(spec("gf-b-abc123-dddddddddd"));
  EXPECT_FALSE(out->answered());
  EXPECT_EQ(s->live(), 1u);
  advance(5s + 30s + 11s); // timeout + grace + backstop slack
  ASSERT_TRUE(out->error);
  EXPECT_EQ(deletes(), 1);
  EXPECT_EQ(s->live(), 0u);
}

TEST_F(execution_test, timeout_exit_maps_to_minus_one) {
  s->exec_reply.exit_code = 124;
  start(spec("gf-b-abc123-eeeeeeeeee"));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.exit_code, -1);
  EXPECT_EQ(out->report->outcome, ec::timeout);
  EXPECT_EQ(deletes(), 1);
}

TEST_F(execution_test, memory_kill_maps_to_oom) {
  s->exec_reply.exit_code = 137;
  s->exec_reply.error = "out of memory (memory limit 256 MiB)";
  s->exec_reply.oom_killed = true; // the memory cgroup counted it: only then is it oom
  start(spec("gf-b-abc123-ffffffffff"));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.exit_code, 137);
  EXPECT_EQ(out->report->outcome, ec::oom);
  EXPECT_EQ(deletes(), 1);
}

TEST_F(execution_test, a_sigkill_the_memory_cgroup_did_not_count_is_killed) {
  s->exec_reply.exit_code = 137;
  s->exec_reply.truncated.stdout_cut = true;
  start(spec("gf-b-abc123-gggggggggg"));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.exit_code, 137);
  EXPECT_EQ(out->report->outcome, ec::killed);
  EXPECT_TRUE(out->report->result.truncated.stdout_cut);
  EXPECT_EQ(deletes(), 1);
}

TEST_F(execution_test, refused_create_leaves_nothing_and_deletes_nothing) {
  s->calls["create"] = {call_script::mode::fail, ec::bad_request, 1};
  start(spec("gf-b-abc123-gggggggggg"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::bad_request);
  EXPECT_EQ(deletes(), 0);
  EXPECT_EQ(s->live(), 0u);
  // The control plane said no: the reaper owes nothing and watches for nothing (a CLI
  // would otherwise wait for it at exit).
  auto st = stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.tracked, 0u);
}

TEST_F(execution_test, a_capacity_refusal_leaves_nothing_to_watch) {
  // No node had room (429 capacity): nothing was built, so the CLI must not wait at exit
  // for the reaper to watch the name.
  s->calls["create"] = {call_script::mode::fail, ec::capacity, 1};
  start(spec("gf-b-abc123-gcgcgcgcgc"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::capacity);
  EXPECT_EQ(deletes(), 0);
  auto st = stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.tracked, 0u);
}

TEST_F(execution_test, a_refused_create_whose_name_is_live_is_still_deleted) {
  // The client re-sent a create after a reset: the first one made the guest, the second
  // is refused because the name is taken.
  s->guests.push_back({"sb-99", "gf-b-abc123-gxgxgxgxgx"});
  start(spec("gf-b-abc123-gxgxgxgxgx"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::bad_request);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-gxgxgxgxgx"), 1);
  EXPECT_EQ(s->live(), 0u);
  auto st = stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.tracked, 0u);
}

TEST_F(execution_test, create_failing_without_a_refusal_is_watched_by_name) {
  s->calls["create"] = {call_script::mode::fail, ec::transient, 1}; // e.g. a 502
  start(spec("gf-b-abc123-ghghghghgh"));
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::transient);
  // The guest may exist even though the answer was an error: the reaper owes it.
  EXPECT_EQ(stats().pending, 1u);
}

TEST_F(execution_test, lost_create_answer_is_still_deleted_by_name) {
  s->calls["create"] = {call_script::mode::hang, ec::transient, 1};
  start(spec("gf-b-abc123-hhhhhhhhhh"));
  EXPECT_EQ(s->live(), 1u); // the guest exists; its id never reached us
  advance(151s);            // the create's backstop fires
  ASSERT_TRUE(out->error);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-hhhhhhhhhh"), 1);
  EXPECT_EQ(stats().pending, 0u);
}

TEST_F(execution_test, failed_delete_is_retried_by_the_reaper_until_done) {
  s->calls["delete"] = {call_script::mode::fail, ec::transient, 3};
  start(spec("gf-b-abc123-iiiiiiiiii"));
  ASSERT_TRUE(out->report); // the run's result does not wait for the reaper
  EXPECT_EQ(s->live(), 1u);
  EXPECT_EQ(stats().pending, 1u);
  for (int i = 0; i < 10 && s->live() > 0; ++i)
    advance(30s);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-iiiiiiiiii"), 1);
  auto st = stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.failed_deletes, 2u); // two of the reaper's own tries failed
}

TEST_F(execution_test, caller_death_mid_run_deletes_the_guest) {
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1};
  auto caller = start(spec("gf-b-abc123-jjjjjjjjjj"));
  EXPECT_EQ(s->live(), 1u);
  caf::anon_send_exit(caller, caf::exit_reason::user_shutdown);
  run();
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(deletes(), 1);
}

TEST_F(execution_test, cancel_during_create_deletes_when_the_create_answers) {
  s->calls["create"] = {call_script::mode::hang, ec::transient, 1};
  execution_actor exec;
  start(spec("gf-b-abc123-kkkkkkkkkk"), &exec);
  caf::anon_send(exec, cancel_atom::value);
  run();
  ASSERT_TRUE(s->held_create);
  sandbox_created c;
  c.id = "sb-1";
  c.name = "gf-b-abc123-kkkkkkkkkk";
  caf::anon_send(cp, done_atom::value, uint64_t{0}, caf::make_message(c));
  run();
  ASSERT_TRUE(out->error);
  EXPECT_EQ(out->error->code, ec::cancelled);
  EXPECT_EQ(out->error->message, "run cancelled");
  EXPECT_EQ(deletes(), 1);
  EXPECT_EQ(s->live(), 0u);
}

TEST_F(execution_test, execution_killed_from_outside_is_reaped) {
  s->calls["exec"] = {call_script::mode::hang, ec::transient, 1};
  execution_actor exec;
  start(spec("gf-b-abc123-llllllllll"), &exec);
  EXPECT_EQ(s->live(), 1u);
  caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
  run();
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-llllllllll"), 1);
}

TEST_F(execution_test, a_run_is_answered_before_its_delete_and_a_kill_then_still_deletes) {
  s->calls["delete"] = {call_script::mode::hang, ec::transient, 1}; // never answered
  execution_actor exec;
  start(spec("gf-b-abc123-rrrrrrrrrr"), &exec);
  ASSERT_TRUE(out->report); // the command exited: the caller has its answer ...
  EXPECT_EQ(out->report->result.stdout_text, "hi\n");
  EXPECT_EQ(s->count("delete "), 1); // ... while the delete is on its way
  EXPECT_EQ(s->live(), 1u);
  EXPECT_EQ(stats().tracked, 1u);
  // The execution dies before the delete answered: the reaper, which watched it, deletes.
  caf::anon_send_exit(exec, caf::exit_reason::kill);
  run();
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-rrrrrrrrrr"), 1);
  auto st = stats();
  EXPECT_EQ(st.pending, 0u);
  EXPECT_EQ(st.tracked, 0u);
}

TEST_F(execution_test, a_drain_waits_for_an_answered_runs_own_delete) {
  // A CLI prints the answer and drains the reaper at once, while the delete is on its way:
  // the drain must not send a second delete beside it, and must wait for it.
  s->calls["delete"] = {call_script::mode::hang, ec::transient, 1};
  execution_actor exec;
  start(spec("gf-b-abc123-tttttttttt"), &exec);
  ASSERT_TRUE(out->report);
  auto drained = std::make_shared<std::optional<uint64_t>>();
  callers.push_back(sys.spawn([this, drained](caf::event_based_actor* self) {
    self->request(rp, std::chrono::seconds{3600}, drain_atom::value)
        .then([drained](uint64_t n) { *drained = n; }, [](caf::error&) {});
  }));
  run();
  EXPECT_FALSE(*drained);
  EXPECT_EQ(s->count("delete "), 1) << "no delete beside the execution's";
  // The execution's delete never answers and the execution dies: now the reaper deletes.
  caf::anon_send_exit(exec, caf::exit_reason::kill);
  run();
  ASSERT_TRUE(*drained);
  EXPECT_EQ(**drained, 0u);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-tttttttttt"), 1);
}

TEST_F(execution_test, failures_and_cancels_are_answered_after_the_delete) {
  s->calls["delete"] = {call_script::mode::hang, ec::transient, 1};
  s->calls["exec"] = {call_script::mode::fail, ec::unavailable, 1};
  start(spec("gf-b-abc123-ssssssssss"));
  EXPECT_FALSE(out->answered()); // no outcome to give before the guest is dealt with
  advance(151s);                 // the delete's timeout: handed to the reaper
  ASSERT_TRUE(out->error);
  for (int k = 0; k < 5 && s->live() > 0; ++k)
    advance(30s);
  EXPECT_EQ(out->error->code, ec::unavailable);
  EXPECT_EQ(s->live(), 0u);
  EXPECT_EQ(s->deletes_of_name("gf-b-abc123-ssssssssss"), 1);
}

TEST_F(execution_test, streamed_exec_collects_lines_and_exit_code) {
  s->stream_lines = {{exec_stream_line::kind::stdout_chunk, "a\n", 0},
                     {exec_stream_line::kind::heartbeat, "", 0},
                     {exec_stream_line::kind::stderr_chunk, "warn\n", 0},
                     {exec_stream_line::kind::stdout_chunk, "b\n", 0}};
  s->stream_exit = 3;
  start(spec("gf-b-abc123-mmmmmmmmmm", true));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.stdout_text, "a\nb\n");
  EXPECT_EQ(out->report->result.stderr_text, "warn\n");
  EXPECT_EQ(out->report->result.exit_code, 3);
  EXPECT_EQ(deletes(), 1);
}

TEST_F(execution_test, streamed_exec_ms_is_the_exit_lines_when_the_server_says_it) {
  // The control plane measured the program's own run: the report says that, not the wait.
  exec_stream_line exit{exec_stream_line::kind::exit_code, "", 0};
  exit.exec_ms = 1234;
  s->stream_lines = {{exec_stream_line::kind::stdout_chunk, "a\n", 0}, exit};
  start(spec("gf-b-abc123-nnnnnnnnnn", true));
  ASSERT_TRUE(out->report);
  EXPECT_EQ(out->report->result.exec_ms, 1234u);
}

TEST_F(execution_test, failure_in_every_state_ends_in_exactly_one_delete) {
  // create ok → each later step fails in turn; each run must delete its own guest once.
  const char* ops[] = {"put", "exec", "delete"};
  int i = 0;
  for (auto op : ops) {
    auto name = "gf-b-abc123-st" + std::to_string(i++) + "xxxxxxx";
    s->calls[op] = {call_script::mode::fail, ec::transient, 1};
    *out = {};
    start(spec(name));
    for (int k = 0; k < 5 && s->live() > 0; ++k)
      advance(30s);
    EXPECT_TRUE(out->answered()) << op;
    EXPECT_EQ(s->deletes_of_name(name), 1) << op;
  }
  EXPECT_EQ(s->live(), 0u);
}

TEST_F(execution_test, failures_while_collecting_files_still_delete_exactly_once) {
  execution_options collecting;
  collecting.collect = std::make_shared<const collect_options>();
  exec_result tar_failed;
  tar_failed.exit_code = 2;
  tar_failed.stderr_text = "tar: cannot open";
  // The program runs (exit 0), then, in turn: tar fails, the fetch fails, the archive
  // does not unpack.
  std::vector<std::function<void()>> faults{
      [&] {
        s->exec_replies = {s->exec_reply, tar_failed};
      },
      [&] {
        s->calls["fetch"] = {call_script::mode::fail, ec::transient, 1};
      },
      [&] { s->fetch_reply = "not a tar archive"; },
  };
  int i = 0;
  for (auto& fault : faults) {
    auto name = "gf-b-abc123-co" + std::to_string(i++) + "xxxxxxx";
    fault();
    *out = {};
    start(spec(name), nullptr, collecting);
    ASSERT_TRUE(out->report) << name; // the run itself succeeded
    ASSERT_TRUE(out->report->files) << name;
    EXPECT_TRUE(out->report->files->error) << name;
    EXPECT_EQ(s->deletes_of_name(name), 1) << name;
  }
  EXPECT_EQ(s->live(), 0u);
}
