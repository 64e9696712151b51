// Flow runs through `guestflow serve` whose executor guests come from its own executor
// pool built as a fork-server pool (GUESTFLOW_FORK_POOL=1, the built-in image preloading
// `guestflow:runner`; controlplane/local/README.md, "Fork-server pools"): each run's guest
// is a clone of the template (its init the static init's fork mode), the run's events are those
// of the same flow in a guest built for it, frame for frame, a second run's guest holds
// nothing of the first run's, and every guest is deleted.
#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/proc.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

/// The python example with its interpreter's code replaced: says whether the guest's init
/// is a fork-pool guest's (the static init's fork mode), and what an earlier run may have left
/// (a file in /tmp and in /workspace, a module attribute), then leaves all three.
std::string probe_flow() {
  std::ifstream in{std::string{GUESTFLOW_SOURCE_DIR} + "/examples/flows/python.json"};
  std::stringstream text;
  text << in.rdbuf();
  auto flow = text.str();
  const std::string code =
      "with open('/proc/1/cmdline', 'rb') as f:\\n"
      "    init = f.read().split(b'\\\\0')\\n"
      "kind = 'clone' if init[:2] == [b'guestflow-init', b'fork'] else 'built'\\n"
      "print('probe', kind, os.path.exists('/tmp/gf-left'), "
      "os.path.exists('/workspace/gf-left'), getattr(json, 'gf_marker', None))\\n"
      "open('/tmp/gf-left', 'w').write('x')\\n"
      "open('/workspace/gf-left', 'w').write('x')\\n"
      "json.gf_marker = 'left'\\n";
  // Global imports and code of the Python Interpreter vertex (the example's own values).
  auto replace = [&](const std::string& from, const std::string& to) {
    auto at = flow.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) flow.replace(at, from.size(), to);
  };
  replace(R"("value": "collections")", R"("value": "os,json")");
  auto at = flow.find(R"("value": "words = input_value.split())");
  EXPECT_NE(at, std::string::npos);
  auto end = flow.find("\\n\"", at);
  flow.replace(at, end + 3 - at, "\"value\": \"" + code + "\"");
  return "{\"flow\":" + flow + R"(,"inputs":"x"})";
}

class fork_pool_runs_test : public bridge_fixture {
protected:
  struct outcome {
    std::vector<run_event::kind> kinds; ///< event by event
    std::string probe;                  ///< the probe's line in the final outputs
  };

  outcome run(const std::string& body) {
    auto s = stream("POST", "/v1/runs", body);
    EXPECT_EQ(s->status(), 200u);
    auto events = drain(*s);
    outcome out;
    for (const auto& e : events)
      out.kinds.push_back(e.type);
    EXPECT_FALSE(events.empty());
    if (events.empty()) return out;
    EXPECT_EQ(events.back().type, run_event::kind::complete) << events.back().message;
    auto text = encode(events.back().run_outputs_list);
    auto p = text.find("probe ");
    EXPECT_NE(p, std::string::npos) << text;
    if (p != std::string::npos) out.probe = text.substr(p, text.find_first_of("\\\"", p) - p);
    return out;
  }

  /// Whether a process of this test's embedded control plane's fork templates (their
  /// command line names its spool) is alive: templates, keepers, clones.
  bool template_processes(const std::filesystem::path& state) const {
    const auto spool = (state / "fork").string();
    return !test_support::pids_where("cmdline", [&](const std::string& c) {
              return c.find(spool) != std::string::npos;
            }).empty();
  }
};

TEST_F(fork_pool_runs_test, flow_runs_from_a_fork_pool_are_right_fresh_and_deleted) {
  const auto body = probe_flow();
  // The same flow in a guest built for the run (the fixture's control plane, no pool).
  auto built = run(body);
  ASSERT_EQ(built.probe, "probe built False False None");
  // serve on its embedded control plane: its executor pool (the executor's shape, the
  // built-in image, deny-all), fork-server, the runner's engine preloaded.
  const auto state = dir.path() / "runtime";
  start_serve({{"GUESTFLOW_CONTROL_PLANE_URL", ""},
               {"GUESTFLOW_FORK_POOL", "1"},
               {"GUESTFLOW_PRELOAD", "guestflow:runner"},
               {"CREATEOS_EXECUTOR_SHAPE", "s-1vcpu-256mb"}});
  // The template is made by the pool's first build; then every run takes a clone.
  ASSERT_TRUE(test_support::eventually([&] { return template_processes(state); }, 120s, 20ms))
      << serve->stderr_text();
  for (int i = 0; i < 3; ++i) {
    outcome pooled;
    // A run that found the pool empty gets a guest built for it: taken again until a
    // clone served one (bounded: the pool refills in tens of milliseconds).
    for (int tries = 0; tries < 20 && pooled.probe.rfind("probe clone", 0) != 0; ++tries)
      pooled = run(body);
    EXPECT_EQ(pooled.probe, "probe clone False False None") << "run " << i;
    EXPECT_EQ(pooled.kinds, built.kinds) << "run " << i << ": frame for frame";
  }
  EXPECT_TRUE(wait_until_no_guest_is_owed()); // a run is answered before its delete
  EXPECT_EQ(metric("guestflow_guests_created_total"), metric("guestflow_guests_deleted_total"));
  auto log = serve->stderr_text();
  EXPECT_EQ(log.find("fork template"), std::string::npos) << log;
  EXPECT_EQ(serve->stop(), 0) << serve->stderr_text();
  // Its stop deletes the pool guests and ends the template: no template, keeper or clone
  // (their command line names the spool) is left.
  EXPECT_TRUE(test_support::eventually([&] { return !template_processes(state); }, 10s, 20ms));
}

} // namespace
} // namespace guestflow::testing
