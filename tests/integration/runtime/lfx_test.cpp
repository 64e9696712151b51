// The lfx path end to end: a Python environment holding the stand-in lfx
// (tests/fixtures/lfx_guest) becomes a guest image through `guestflow image add
// --python-env`, and `guestflow run --image` runs flows through lfx_path.py in real guests.

#include "messages/json_codec.hpp"
#include "messages/run.hpp"
#include "tests/integration/runtime/flows.hpp"
#include "tests/integration/runtime/runtime_fixture.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::testing;

namespace {

namespace fs = std::filesystem;

/// The last NDJSON line of `text` as a run event.
result<run_event> last_event(const std::string& text) {
  auto end = text.find_last_not_of('\n');
  if (end == std::string::npos) return fail(ec::bad_request, "no output");
  auto start = text.rfind('\n', end);
  return decode<run_event>(text.substr(start == std::string::npos ? 0 : start + 1,
                                       end - (start == std::string::npos ? 0 : start + 1) + 1));
}

/// A vertex as Langflow exports it (lfx reads `data.id`, the template's `_type` and the
/// outputs): a `genericNode` whose one output is `output`.
std::string component(const std::string& id, const std::string& type, const std::string& fields,
                      const std::string& output = "text") {
  return R"({"id":")" + id + R"(","type":"genericNode","data":{"id":")" + id + R"(","type":")" +
         type + R"(","node":{"display_name":")" + id + R"(","template":{"_type":"Component",)" +
         fields.substr(1) + R"(,"outputs":[{"name":")" + output +
         R"(","types":["Message"],"selected":"Message","method":"build","cache":true}]}}})";
}

/// ChatInput → `type` (its template `fields`) → ChatOutput. The two ends have Langflow's
/// `<type>-<suffix>` ids: lfx tells input and output vertices by their id
/// (`INPUT_COMPONENTS`/`OUTPUT_COMPONENTS` in `vertex/base.py`), and `Graph._run` harvests
/// only output vertices.
std::string one_step_flow(const std::string& type, const std::string& fields) {
  auto io = R"({"input_value":{"value":""}})";
  return R"({"nodes":[)" + component("ChatInput-in", "ChatInput", io, "message") + "," +
         component("step", type, fields) + "," +
         component("ChatOutput-out", "ChatOutput", io, "message") + R"(],"edges":[)" +
         edge("ChatInput-in", "message", "step", "input_value") + "," +
         edge("step", "text", "ChatOutput-out", "input_value") + "]}";
}

/// lfx's Loop as Langflow exports it: `item` (the output the body's result comes back
/// into: `allows_loop`) and `done`.
std::string loop_component(const std::string& id) {
  return R"({"id":")" + id + R"(","type":"genericNode","data":{"id":")" + id +
         R"(","type":"LoopComponent","node":{"display_name":"Loop","template":{"_type":)"
         R"("Component","data":{"value":null}},"outputs":[)"
         R"({"name":"item","types":["Data"],"selected":"Data","method":"item_output",)"
         R"("allows_loop":true},{"name":"done","types":["DataFrame"],"selected":"DataFrame",)"
         R"("method":"done_output"}]}}})";
}

/// ChatInput → Lines (a row per line) → Loop; Loop.item → Uppercase → back into Loop.item
/// (the feedback edge that makes the cycle Langflow allows); the Loop's `done` is harvested.
std::string loop_flow() {
  auto io = R"({"input_value":{"value":""}})";
  return R"({"nodes":[)" + component("ChatInput-in1", "ChatInput", io, "message") + "," +
         component("Lines-x1", "Lines", io, "dataframe") + "," +
         loop_component("LoopComponent-l1") + "," +
         component("Uppercase-up1", "Uppercase", io) + R"(],"edges":[)" +
         edge("ChatInput-in1", "message", "Lines-x1", "input_value") + "," +
         edge("Lines-x1", "dataframe", "LoopComponent-l1", "data") + "," +
         edge("LoopComponent-l1", "item", "Uppercase-up1", "input_value") + "," +
         edge("Uppercase-up1", "text", "LoopComponent-l1", "item") + "]}";
}

/// The canonical text of member `key` of the JSON object `text`; "" when it has none.
std::string member_text(const std::string& text, const char* key) {
  codec::document doc;
  decode_limits limits{text.size() + 1, 64};
  if (codec::parse(text, limits, doc) || !doc.IsObject()) return {};
  auto m = doc.FindMember(key);
  return m == doc.MemberEnd() ? std::string{} : codec::canonical(m->value, {}).text;
}

class lfx_test : public runtime_fixture {
protected:
  std::string prefix;

  void SetUp() override {
    runtime_fixture::SetUp();
    // A Debian venv (its python is /usr/bin/python3, which every guest has) with lfx in it.
    prefix = (dir.path() / "langflow-venv").string();
    ASSERT_EQ(std::system(("/usr/bin/python3 -m venv --without-pip " + prefix).c_str()), 0);
    auto site = fs::path{prefix} / "lib" / python_dir() / "site-packages";
    ASSERT_TRUE(fs::is_directory(site)) << site;
    fs::copy(fs::path{GUESTFLOW_SOURCE_DIR} / "tests/fixtures/lfx_guest/lfx", site / "lfx",
             fs::copy_options::recursive);
    auto added = cli({"image", "add", "langflow", "--python-env", prefix});
    ASSERT_EQ(added.status, 0) << added.stderr_text;
  }

  /// "python3.11": the directory the venv's site-packages live in.
  static std::string python_dir() {
    std::string out;
    if (auto* p = ::popen("/usr/bin/python3 -c 'import sys; print(\"python%d.%d\" % "
                          "sys.version_info[:2])'",
                          "r")) {
      char buf[64];
      while (auto n = std::fread(buf, 1, sizeof buf, p))
        out.append(buf, n);
      ::pclose(p);
    }
    while (!out.empty() && out.back() == '\n')
      out.pop_back();
    return out;
  }

  control_plane_process::outcome run(std::vector<std::string> args) {
    args.insert(args.begin(), "run");
    return cli(args);
  }
};

} // namespace

TEST_F(lfx_test, a_flow_only_lfx_can_build_runs_through_lfx_and_says_so) {
  auto f = file("upper.json", one_step_flow("Uppercase", R"({"input_value":{"value":""}})"));
  auto r =
      run({f, "--image", "langflow", "--executor", "lfx", "--input", "hi there", "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  auto last = last_event(r.stdout_text);
  ASSERT_TRUE(last) << r.stdout_text;
  EXPECT_EQ(last->type, run_event::kind::complete);
  EXPECT_EQ(last->executor, "lfx");
  EXPECT_TRUE(last->failed.empty());
  // Every vertex started and was built, in order, then outputs harvested like Graph._run.
  auto started = r.stdout_text.find(R"("type":"vertex_started","id":"step")");
  auto built = r.stdout_text.find(R"("type":"vertex_built","id":"step")");
  EXPECT_NE(started, std::string::npos) << r.stdout_text;
  EXPECT_LT(started, built);
  ASSERT_EQ(last->run_outputs_list.size(), 1u);
  ASSERT_EQ(last->run_outputs_list[0].outputs.size(), 1u) << "the output vertex only";
  ASSERT_TRUE(last->run_outputs_list[0].outputs[0]);
  EXPECT_EQ(last->run_outputs_list[0].outputs[0]->component_id, "ChatOutput-out");
  EXPECT_NE(last->run_outputs_list[0].outputs[0]->results.text.find("HI THERE"),
            std::string::npos)
      << last->run_outputs_list[0].outputs[0]->results.text;
  auto plain = run({f, "--image", "langflow", "--input", "hi there"}); // auto picks lfx here
  ASSERT_EQ(plain.status, 0) << plain.stderr_text;
  EXPECT_EQ(plain.stdout_text, "HI THERE\n");
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(lfx_test, a_flow_with_a_loop_runs_in_a_guest_as_the_stand_in_runs_it_in_process) {
  auto f = file("loop.json", loop_flow());
  auto r = run({f, "--image", "langflow", "--executor", "lfx", "--input", "x\ny\nz", "--output",
                "Loop", "--events"});
  ASSERT_EQ(r.status, 0) << r.stderr_text << r.stdout_text;
  auto last = last_event(r.stdout_text);
  ASSERT_TRUE(last) << r.stdout_text;
  ASSERT_EQ(last->type, run_event::kind::complete) << last->message;
  EXPECT_EQ(last->executor, "lfx");
  ASSERT_EQ(last->run_outputs_list.size(), 1u);
  ASSERT_EQ(last->run_outputs_list[0].outputs.size(), 1u) << r.stdout_text;
  ASSERT_TRUE(last->run_outputs_list[0].outputs[0]);
  auto guest_done = member_text(last->run_outputs_list[0].outputs[0]->results.text, "done");
  // The same flow through the stand-in lfx in this process: Langflow's run (Graph.arun).
  auto script = file("in_process.py", std::string{R"(import asyncio, json, sys
sys.path.insert(0, sys.argv[1])
from lfx.graph import Graph
graph = Graph.from_payload(json.load(open(sys.argv[2])))
runs = asyncio.run(graph.arun([{"input_value": "x\ny\nz"}], outputs=["Loop"]))
print(json.dumps(runs[0].outputs[0].results["done"].to_dict()))
)"});
  std::string in_process;
  auto cmd = "/usr/bin/python3 " + script + " " + GUESTFLOW_SOURCE_DIR +
             "/tests/fixtures/lfx_guest " + f;
  if (auto* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    while (auto n = std::fread(buf, 1, sizeof buf, p))
      in_process.append(buf, n);
    ASSERT_EQ(::pclose(p), 0) << in_process;
  }
  auto expected = member_text(R"({"done":)" + in_process + "}", "done");
  ASSERT_NE(expected, "") << in_process;
  EXPECT_EQ(guest_done, expected) << last->run_outputs_list[0].outputs[0]->results.text;
  // Three items, each through the body: the Loop's `done` is their uppercase rows.
  EXPECT_NE(expected.find(R"("X")"), std::string::npos) << expected;
  EXPECT_NE(expected.find(R"("Z")"), std::string::npos) << expected;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(lfx_test, a_real_export_with_a_note_runs_through_lfx) {
  auto r = run({example("prompt"), "--image", "langflow", "--input", "Ada", "--json"});
  ASSERT_EQ(r.status, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(R"("executor":"lfx")"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("Say hello to Ada in French."), std::string::npos)
      << r.stdout_text;
}

TEST_F(lfx_test, a_failing_vertex_stops_lfx_and_its_successors_are_not_built) {
  auto f =
      file("raise.json",
           one_step_flow("Raise", R"({"input_value":{"value":""},"message":{"value":"no"}})"));
  auto r = run({f, "--image", "langflow", "--executor", "lfx", "--input", "x", "--json"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find(R"({"error":{"code":"guest_failed",)"
                               R"("message":"Error building Component step: \n\n)"),
            std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find(R"("executor":"lfx","failed":[{"id":"step")"), std::string::npos)
      << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find(R"({"id":"ChatOutput-out")"), std::string::npos)
      << "the vertex after the failed one is not built: " << r.stdout_text;
  EXPECT_NE(r.stderr_text.find("✗ step"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(lfx_test, a_run_past_its_timeout_ends_in_one_timeout_error_and_no_guest) {
  auto f =
      file("sleep.json",
           one_step_flow("Sleep", R"({"input_value":{"value":""},"seconds":{"value":60}})"));
  auto r = run({f, "--image", "langflow", "--executor", "lfx", "--input", "x", "--timeout", "3",
                "--events"});
  EXPECT_EQ(r.status, 1) << r.stderr_text;
  auto last = last_event(r.stdout_text);
  ASSERT_TRUE(last) << r.stdout_text;
  EXPECT_EQ(last->type, run_event::kind::error);
  EXPECT_EQ(last->code, ec::timeout) << last->message;
  EXPECT_EQ(last->executor, "lfx");
  EXPECT_NE(r.stdout_text.find(R"("type":"vertex_started","id":"step")"), std::string::npos)
      << "the events before the kill arrived: " << r.stdout_text;
  EXPECT_TRUE(wait_for_live(0));
}

TEST_F(lfx_test, the_core_executor_on_the_same_image_refuses_what_only_lfx_builds) {
  auto f = file("upper.json", one_step_flow("Uppercase", R"({"input_value":{"value":""}})"));
  auto r = run({f, "--image", "langflow", "--executor", "core", "--input", "x"});
  EXPECT_EQ(r.status, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("Uppercase"), std::string::npos) << r.stderr_text;
  EXPECT_TRUE(wait_for_live(0));
}
