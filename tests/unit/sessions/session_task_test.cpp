// One session call against a scripted control plane (deterministic scheduler): the
// download cap binds again while the bytes travel, and a streamed command's lines reach its
// relay in order, its end last, and a relay gone cancels the command.

#include "actors/session_task.hpp"
#include "messages/session.hpp"
#include "tests/unit/actors/deterministic.hpp"
#include "tests/unit/actors/scripted_controlplane.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/typed_event_based_actor.hpp>

namespace guestflow::test {
namespace {

struct relay_log {
  std::vector<std::string> seen; ///< "open", then each line ("last:" before the last)
};

line_relay_actor::behavior_type recording_relay(line_relay_actor::pointer self,
                                                std::shared_ptr<relay_log> log) {
  return {
      [log](open_atom) { log->seen.push_back("open"); },
      [self, log](std::string& line, bool last) {
        log->seen.push_back((last ? "last:" : "") + line);
        if (last) self->quit();
      },
  };
}

class session_task_test : public deterministic {
protected:
  std::shared_ptr<script> s = std::make_shared<script>();
  controlplane_actor cp;
  session_task_options opts;

  void SetUp() override {
    cp = sys.spawn(scripted_controlplane, s);
    opts.download_cap_bytes = 10;
    run();
  }

  void TearDown() override {
    caf::anon_send_exit(cp, caf::exit_reason::user_shutdown);
    run();
  }

  /// Asks a fresh task `xs…`; the answer or the failure.
  template<class R, class... Ts>
  std::pair<std::optional<R>, std::optional<failure>> ask(Ts... xs) {
    auto out = std::make_shared<std::pair<std::optional<R>, std::optional<failure>>>();
    auto task = sys.spawn(session_task, cp, opts);
    sys.spawn([task, out, xs...](caf::event_based_actor* self) {
      self->request(task, std::chrono::seconds{3600}, xs...)
          .then([out](R& r) { out->first = r; },
                [out](caf::error& e) { out->second = to_failure(e); });
    });
    run();
    return *out;
  }
};

session_file_call download(std::string path) {
  session_file_call c;
  c.op = "download";
  c.path = std::move(path);
  return c;
}

TEST_F(session_task_test, TheDownloadCapBindsWhileTheBytesTravel) {
  // The tool found the file within the cap, but it grew before the copy: the fetch of the
  // staged bytes is capped too, and the stage is removed either way.
  s->exec_reply.stdout_text = "OK {\"size\":5}\n";
  s->fetch_reply = std::string(11, 'x');
  auto grown = ask<session_file_answer>(fetch_atom::value, std::string{"sb-1"},
                                        download("/workspace/f"));
  ASSERT_TRUE(grown.second);
  EXPECT_EQ(grown.second->code, ec::artifact_too_large);
  ASSERT_EQ(s->exec_cmds.size(), 2u);
  EXPECT_EQ(s->exec_cmds[1].cmd, "rm");
  s->fetch_reply = std::string(10, 'y');
  auto fits = ask<session_file_answer>(fetch_atom::value, std::string{"sb-1"},
                                       download("/workspace/f"));
  ASSERT_TRUE(fits.first);
  EXPECT_EQ(fits.first->body, std::string(10, 'y'));
  EXPECT_EQ(fits.first->content_type, "application/octet-stream");
  EXPECT_EQ(s->exec_cmds.size(), 4u);
}

TEST_F(session_task_test, AStreamedCommandSendsEachPieceThenItsEndToTheRelay) {
  using kind = exec_stream_line::kind;
  s->stream_lines = {
      {kind::stdout_chunk, "a\n"}, {kind::stderr_chunk, "b\n"}, {kind::stdout_chunk, "c\n"}};
  s->stream_exit = 3;
  auto log = std::make_shared<relay_log>();
  auto relay = sys.spawn(recording_relay, log);
  session_command cmd;
  cmd.command = "x";
  auto r = ask<command_outcome>(stream_atom::value, std::string{"sb-1"}, cmd, relay);
  ASSERT_TRUE(r.first);
  EXPECT_EQ(r.first->exit_code, 3);
  EXPECT_EQ(log->seen, (std::vector<std::string>{"open", R"({"stdout":"a\n"})",
                                                 R"({"stderr":"b\n"})", R"({"stdout":"c\n"})",
                                                 R"(last:{"exit_code":3,"timed_out":false})"}));
  EXPECT_EQ(s->count("cancel"), 0);
}

TEST_F(session_task_test, ARelayGoneCancelsTheCommandAndAFailureIsTheLastLine) {
  s->calls["stream"] = {call_script::mode::hang};
  auto log = std::make_shared<relay_log>();
  auto relay = sys.spawn(recording_relay, log);
  session_command cmd;
  cmd.command = "sleep 100";
  auto task = sys.spawn(session_task, cp, opts);
  caf::anon_send(task, stream_atom::value, std::string{"sb-1"}, cmd, relay);
  run();
  EXPECT_EQ(log->seen, std::vector<std::string>{"open"});
  caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
  run();
  EXPECT_EQ(s->count("cancel"), 1);
  // (A real control plane then ends the stream; this scripted one never answers.)
  caf::anon_send_exit(task, caf::exit_reason::user_shutdown);
  run();

  // A control plane that fails the stream: the relay's last line is the error.
  s->calls["stream"] = {call_script::mode::fail, ec::unavailable};
  auto log2 = std::make_shared<relay_log>();
  auto relay2 = sys.spawn(recording_relay, log2);
  auto r = ask<command_outcome>(stream_atom::value, std::string{"sb-1"}, cmd, relay2);
  ASSERT_TRUE(r.second);
  EXPECT_EQ(r.second->code, ec::unavailable);
  ASSERT_EQ(log2->seen.size(), 2u);
  EXPECT_EQ(log2->seen[1].rfind(R"(last:{"error":{"code":"unavailable")", 0), 0u)
      << log2->seen[1];
}

} // namespace
} // namespace guestflow::test
