// `guestflow run` end to end: example flows and broken ones on the real local control plane.

#include "messages/run.hpp"
#include "tests/integration/runtime/flows.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

class run_test : public runtime_fixture {
protected:
  control_plane_process::outcome run(std::vector<std::string> args,
                                     std::map<std::string, std::string> extra = {}) {
    args.insert(args.begin(), "run");
    return cli(args, std::move(extra));
  }
};

} // namespace

TEST_F(run_test, hello_echoes_the_input) {
  auto r = run({example("hello"), "--input", "hi there"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "hi there\n");
  EXPECT_NE(r.stderr_text.find("✓ Chat Output"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, prompt_fills_its_template_from_the_input) {
  auto r = run({example("prompt"), "--input", "hi there"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "Say hello to hi there in French.\n");
}

TEST_F(run_test, python_interpreter_computes_from_the_input) {
  auto r = run({example("python"), "--input", "hi there"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "2 words; most common: hi (1); reversed: there hi\n");
}

TEST_F(run_test, diamond_joins_two_branches) {
  auto r = run({example("diamond"), "--input", "hi there"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "Shout: hi there! | Whisper: (hi there)\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, json_prints_the_api_v1_run_body) {
  auto r = run({example("hello"), "--input", "hi", "--json"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto outs = decode_run_outputs(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(outs) << r.stdout_text;
  ASSERT_EQ(outs->size(), 1u);
  ASSERT_EQ((*outs)[0].outputs.size(), 1u);
  ASSERT_TRUE((*outs)[0].outputs[0]);
  EXPECT_EQ((*outs)[0].outputs[0]->component_display_name, "Chat Output");
  EXPECT_NE((*outs)[0].outputs[0]->results.text.find(R"("text":"hi")"), std::string::npos);
}

TEST_F(run_test, output_selects_the_harvested_vertices) {
  auto r = run({example("diamond"), "--input", "x", "--output", "Chat Input", "--json"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  auto outs = decode_run_outputs(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(outs) << r.stdout_text;
  ASSERT_EQ((*outs)[0].outputs.size(), 1u);
  EXPECT_EQ((*outs)[0].outputs[0]->component_display_name, "Chat Input");
}

TEST_F(run_test, events_arrive_while_the_flow_runs) {
  int out = -1;
  auto pid = start_cli({"run", example("slow"), "--input", "x", "--events"}, env(), &out);
  ASSERT_GT(pid, 0);
  std::string buffer;
  std::vector<std::string> lines;
  bool saw_first_built_while_running = false;
  auto end = read_stream(out, [&](std::string_view chunk) {
    buffer.append(chunk);
    for (auto nl = buffer.find('\n'); nl != std::string::npos; nl = buffer.find('\n')) {
      lines.push_back(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
      auto e = decode<run_event>(lines.back());
      if (e && e->type == run_event::kind::vertex_built && lines.size() <= 2) {
        // The first vertex is reported before the sleeping one finishes: the CLI is still
        // running and nothing terminal has been seen.
        saw_first_built_while_running = ::waitpid(pid, nullptr, WNOHANG) == 0;
      }
    }
    return false; // to the end of the stream
  });
  ASSERT_EQ(end, stream_end::eof) << "no end of stream before the deadline";
  for (size_t i = 0; i < lines.size(); ++i) {
    auto e = decode<run_event>(lines[i]);
    ASSERT_TRUE(e) << lines[i];
    EXPECT_EQ(e->seq, i); // gapless from 0
  }
  ::close(out);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(saw_first_built_while_running);
  ASSERT_FALSE(lines.empty());
  auto last = decode<run_event>(lines.back());
  ASSERT_TRUE(last);
  EXPECT_EQ(last->type, run_event::kind::complete);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(run_test, malformed_json_is_bad_input_and_creates_nothing) {
  auto f = file("bad.json", R"({"nodes":[)");
  auto r = run({f});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.stderr_text.find("bad_request"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, missing_edges_is_bad_input) {
  auto f = file("bad.json", R"({"nodes":[]})");
  auto r = run({f});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.stderr_text.find("edges"), std::string::npos) << r.stderr_text;
}

TEST_F(run_test, dangling_edge_is_bad_input) {
  auto f = file("bad.json", R"({"nodes":[)" + node("a", "ChatInput", "{}") + R"(],"edges":[)" +
                                edge("a", "message", "ghost", "input_value") + "]}");
  auto r = run({f});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.stderr_text.find("ghost"), std::string::npos) << r.stderr_text;
}

TEST_F(run_test, cycle_is_bad_input_naming_it) {
  auto f = file("bad.json", R"({"nodes":[)" + node("a", "Prompt", "{}") + "," +
                                node("b", "Prompt", "{}") + R"(],"edges":[)" +
                                edge("a", "prompt", "b", "x") + "," +
                                edge("b", "prompt", "a", "y") + "]}");
  auto r = run({f});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.stderr_text.find("cycle"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, the_core_executor_refuses_unknown_types_before_any_vertex_runs) {
  auto f = file("unknown.json", R"({"nodes":[)" + node("in", "ChatInput", "{}") + "," +
                                    node("llm", "FancyLLM", "{}") + "," +
                                    node("tool", "FancyTool", "{}") + "," +
                                    node("out", "ChatOutput", "{}") + R"(],"edges":[)" +
                                    edge("in", "message", "llm", "input_value") + "," +
                                    edge("llm", "text", "out", "input_value") + "]}");
  auto r = run({f, "--input", "x", "--events"});
  EXPECT_EQ(r.status, 2) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("vertex_"), std::string::npos)
      << "no vertex ran: " << r.stdout_text;
  auto last = decode<run_event>(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(last) << r.stdout_text;
  EXPECT_EQ(last->code, ec::bad_request);
  EXPECT_EQ(last->executor, "core");
  for (auto want : {"FancyLLM", "FancyTool", "llm", "tool", "guestflow image add"})
    EXPECT_NE(last->message.find(want), std::string::npos) << want << " in " << last->message;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, a_langflow_starter_export_with_a_note_is_refused_by_core_naming_its_model) {
  // Chat Input → Prompt → OpenAI → Chat Output, plus a canvas note: the export loads, and
  // the core executor, which has no OpenAI component, says so before anything runs.
  // Its OpenAI key is a Langflow global variable (`load_from_db`): without it the run is
  // refused first, naming the variable; with it, the core executor names the model.
  auto unset =
      run({example("basic_prompting"), "--input", "hi", "--executor", "core", "--json"});
  EXPECT_EQ(unset.status, 2) << unset.stderr_text;
  EXPECT_NE(unset.stdout_text.find("variable 'OPENAI_API_KEY'"), std::string::npos)
      << unset.stdout_text;
  auto r = run({example("basic_prompting"), "--input", "hi", "--executor", "core", "--var",
                "OPENAI_API_KEY=sk-not-used-here", "--json"});
  EXPECT_EQ(r.status, 2) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("sk-not-used-here"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find(R"("error":{"code":"bad_request")"), std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("OpenAIModel-Kp3sD"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find(R"("executor":"core")"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("note-"), std::string::npos) << "the note is no vertex";
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, an_export_with_a_canvas_note_runs_and_says_which_executor_ran) {
  auto r = run({example("prompt"), "--input", "Ada", "--json"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(R"("executor":"core")"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(R"("error":{)"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("Say hello to Ada in French."), std::string::npos);
}

TEST_F(run_test, executor_lfx_without_lfx_in_the_image_fails_at_once_and_never_falls_back) {
  auto r = run({example("hello"), "--input", "x", "--executor", "lfx", "--events"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_EQ(r.stdout_text.find("vertex_"), std::string::npos) << r.stdout_text;
  auto last = decode<run_event>(r.stdout_text.substr(0, r.stdout_text.find('\n')));
  ASSERT_TRUE(last) << r.stdout_text;
  EXPECT_EQ(last->code, ec::unavailable) << last->message;
  EXPECT_NE(last->message.find("lfx"), std::string::npos) << last->message;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, a_bad_executor_or_output_name_is_bad_input_naming_the_choices) {
  auto bad_executor = run({example("hello"), "--executor", "fast"});
  EXPECT_EQ(bad_executor.status, 2);
  EXPECT_NE(bad_executor.stderr_text.find("auto, core or lfx"), std::string::npos)
      << bad_executor.stderr_text;
  auto bad_output = run({example("diamond"), "--input", "x", "--output", "Nope"});
  EXPECT_EQ(bad_output.status, 2);
  EXPECT_NE(bad_output.stderr_text.find(R"("Nope" matches no vertex)"), std::string::npos)
      << bad_output.stderr_text;
  EXPECT_NE(bad_output.stderr_text.find("ChatOutput"), std::string::npos)
      << "the output vertices are listed: " << bad_output.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, unreadable_flows_give_the_os_reason) {
  auto as_dir = run({dir.path().string()});
  EXPECT_EQ(as_dir.status, 2);
  EXPECT_NE(as_dir.stderr_text.find("Is a directory"), std::string::npos) << as_dir.stderr_text;
  auto missing = run({(dir.path() / "nope.json").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.stderr_text.find("No such file or directory"), std::string::npos)
      << missing.stderr_text;
}

TEST_F(run_test, a_flow_on_standard_input_runs) {
  // The CLI inherits this process's standard input for the run: point it at the flow.
  auto flow = ::open(example("hello").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(flow, 0);
  auto saved = ::dup(0);
  ::dup2(flow, 0);
  auto r = run({"-", "--input", "from stdin"});
  ::dup2(saved, 0);
  ::close(saved);
  ::close(flow);
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "from stdin\n");
}

TEST_F(run_test, a_failed_vertex_ends_the_run_with_langflows_error_after_the_steps_before_it) {
  // As Langflow's own run: the vertices before the failed one are built, the run stops
  // there and raises lfx's ComponentBuildError text ("Error building Component <display
  // name>: \n\n<error>"); nothing after it is built.
  auto f = file("raise.json", python_flow(R"j("raise ValueError('boom')")j"));
  auto r = run({f, "--input", "x", "--json"});
  EXPECT_EQ(r.status, 1);
  // The vertex's error is the runner's; the run's is Langflow's text around it.
  EXPECT_NE(r.stdout_text.find(R"({"error":{"code":"guest_failed",)"
                               R"("message":"Error building Component py: \n\n)"),
            std::string::npos)
      << r.stdout_text;
  // The step's error is the exception's own text (lfx's `{exc}`), not a second name.
  EXPECT_NE(
      r.stdout_text.find(R"("message":"Error building Component py: \n\nValueError: boom")"),
      std::string::npos)
      << r.stdout_text;
  EXPECT_NE(
      r.stdout_text.find(R"("failed":[{"id":"py","name":"py","error":"ValueError: boom"}])"),
      std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(R"("outputs")"), std::string::npos) << r.stdout_text;
  auto events = run({f, "--input", "x", "--events"});
  EXPECT_EQ(events.status, 1);
  std::vector<run_event> evs;
  for (size_t at = 0, nl; (nl = events.stdout_text.find('\n', at)) != std::string::npos;
       at = nl + 1) {
    auto e = decode<run_event>(events.stdout_text.substr(at, nl - at));
    ASSERT_TRUE(e) << events.stdout_text;
    evs.push_back(std::move(*e));
  }
  ASSERT_FALSE(evs.empty());
  auto& last = evs.back();
  EXPECT_EQ(last.type, run_event::kind::error);
  EXPECT_EQ(last.code, ec::guest_failed);
  EXPECT_EQ(last.message, "Error building Component py: \n\nValueError: boom");
  EXPECT_EQ(last.failed, std::vector<std::string>{"py"});
  EXPECT_EQ(last.executor, "core");
  std::vector<std::string> steps;
  for (auto& e : evs)
    if (e.type == run_event::kind::vertex_built || e.type == run_event::kind::vertex_failed)
      steps.push_back((e.type == run_event::kind::vertex_built ? "built " : "failed ") + e.id);
  EXPECT_EQ(steps, (std::vector<std::string>{"built in", "failed py"}))
      << "the steps before the failure, then it; `out` is never built";
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, progress_names_vertices_by_id_where_display_names_repeat) {
  auto twin = [](const std::string& id) {
    return R"({"id":")" + id +
           R"(","data":{"type":"ChatOutput","node":{"display_name":"Reply",)"
           R"("template":{"input_value":{"value":""}}}}})";
  };
  auto f = file("twins.json", R"({"nodes":[)" + node("in", "ChatInput", "{}") + "," +
                                  twin("r1") + "," + twin("r2") + R"(],"edges":[)" +
                                  edge("in", "message", "r1", "input_value") + "," +
                                  edge("in", "message", "r2", "input_value") + "]}");
  auto r = run({f, "--input", "x"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("✓ Reply (r1)"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("✓ Reply (r2)"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("✓ in "), std::string::npos) << "unique names stay bare";
}

TEST_F(run_test, ctrl_c_cancels_the_run_exits_130_and_deletes_the_guest) {
  int out = -1;
  auto f = file("sleepy.json", python_flow(R"j("import time\ntime.sleep(120)")j"));
  auto pid = start_cli({"run", f, "--input", "x", "--events"}, env(), &out);
  ASSERT_GT(pid, 0);
  // Once the Python vertex has started, the run is in its guest.
  std::string seen;
  read_stream(out, [&](std::string_view chunk) {
    seen.append(chunk);
    return seen.find(R"("id":"py")") != std::string::npos;
  });
  ASSERT_NE(seen.find(R"("id":"py")"), std::string::npos) << seen;
  ::kill(pid, SIGINT);
  read_stream( // the rest, up to EOF
      out,
      [&](std::string_view chunk) {
        seen.append(chunk);
        return false;
      },
      120s);
  ::close(out);
  int status = -1;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << status;
  EXPECT_NE(seen.find(R"("type":"error","code":"cancelled")"), std::string::npos) << seen;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, raising_vertex_fails_the_run) {
  auto f = file("raise.json", python_flow(R"j("raise ValueError('boom')")j"));
  auto r = run({f, "--input", "x"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.stderr_text.find("boom"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, a_flow_printing_100_mb_completes_with_bounded_logs) {
  auto f =
      file("loud.json",
           python_flow(R"j("for i in range(100):\n    print('x' * 1048576)\nprint('done')")j"));
  auto r = run({f, "--input", "x", "--events"});
  EXPECT_EQ(r.status, 0) << r.stderr_text.substr(0, 2000);
  EXPECT_LT(r.stdout_text.size(), size_t{8} << 20); // the events carry capped logs only
  EXPECT_NE(r.stdout_text.find(R"("type":"complete")"), std::string::npos);
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(run_test, a_run_past_its_timeout_ends_in_one_timeout_error) {
  auto f = file("sleepy.json", python_flow(R"j("import time\ntime.sleep(60)")j"));
  auto r = run({f, "--input", "x", "--timeout", "2", "--events"});
  EXPECT_EQ(r.status, 1);
  ASSERT_FALSE(r.stdout_text.empty());
  auto last_line =
      r.stdout_text.substr(r.stdout_text.rfind('\n', r.stdout_text.size() - 2) + 1);
  auto last = decode<run_event>(last_line.substr(0, last_line.find('\n')));
  ASSERT_TRUE(last) << r.stdout_text;
  EXPECT_EQ(last->type, run_event::kind::error);
  EXPECT_EQ(last->code, ec::timeout) << last->message;
  size_t terminals = 0;
  for (size_t at = 0;
       (at = r.stdout_text.find(R"("type":"complete")", at)) != std::string::npos; ++at)
    ++terminals;
  EXPECT_EQ(terminals, 0u);
  EXPECT_TRUE(wait_for_live(0));
}
