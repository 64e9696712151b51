#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "messages/flow_run.hpp"
#include "messages/result_text.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <condition_variable>
#include <deque>
#include <iostream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage = R"(usage: guestflow run FLOW.json [--input TEXT] [--output VERTEX]... [--json]
                     [--events] [--timeout S]

Runs a whole Langflow flow (a Graph.dump() JSON export) inside one fresh guest and deletes
the guest afterwards. Progress goes to stderr as vertices build (✓ name 12 ms / ✗ name:
error); stdout gets the final chat/text output, or with --json the /api/v1/run-shaped body
{"outputs":[RunOutputs]}, or with --events every run event as NDJSON as it happens.
--output selects the vertices (id or display name) whose results are returned (default:
every output vertex). Exit status: 0 success, 1 a vertex or the run failed, 2 bad input.

Executor settings: CREATEOS_EXECUTOR_SHAPE (s-4vcpu-8gb), CREATEOS_EXECUTOR_TIMEOUT_SECONDS
(600), CREATEOS_EXECUTOR_EGRESS (*), CREATEOS_EXECUTOR_ROOTFS, CREATEOS_EXECUTOR_INSTALL_LFX,
CREATEOS_EXECUTOR_PIP.)";

/// Events handed from the subscriber actor to the printing thread, in order.
struct event_queue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<run_event> events;

  void push(run_event e) {
    {
      std::lock_guard<std::mutex> guard{mu};
      events.push_back(std::move(e));
    }
    cv.notify_one();
  }

  run_event pop() {
    std::unique_lock<std::mutex> guard{mu};
    cv.wait(guard, [this] { return !events.empty(); });
    auto e = std::move(events.front());
    events.pop_front();
    return e;
  }
};

run_subscriber_actor::behavior_type subscriber(run_subscriber_actor::pointer,
                                               std::shared_ptr<event_queue> q) {
  return {[q](run_event& e) { q->push(std::move(e)); }};
}

void progress(const run_event& e) {
  using k = run_event::kind;
  if (e.type == k::vertex_built)
    std::cerr << "✓ " << e.name << ' ' << e.duration_ms << " ms\n";
  else if (e.type == k::vertex_failed)
    std::cerr << "✗ " << e.name << ": " << e.message << '\n';
  else if (e.type == k::stdout_line)
    std::cerr << e.line << '\n';
  else if (e.type == k::error)
    std::cerr << "guestflow run: " << to_string(e.code) << ": " << e.message << '\n';
}

int run_flow(const std::vector<std::string>& argv) {
  signal_watch watch;
  args a{{"input", "output", "timeout"}, {"json", "events"}};
  if (auto err = a.parse(argv); err || a.positionals().size() != 1) {
    std::cerr << "guestflow run: " << err.value_or("expected one FLOW.json") << "\n"
              << usage << '\n';
    return 2;
  }
  auto text = read_bytes(a.positionals()[0]);
  if (!text) {
    report_failure("run", text.error());
    return 2;
  }
  auto graph = decode<flow_graph>(*text);
  if (!graph) {
    report_failure("run", graph.error());
    return 2;
  }
  run_request req;
  req.graph = std::move(*graph);
  if (auto input = a.get("input"))
    req.inputs = raw_json{quote_json(*input)};
  req.outputs = a.all("output");
  if (auto t = a.get("timeout")) {
    char* end = nullptr;
    auto v = std::strtoul(t->c_str(), &end, 10);
    if (t->empty() || *end != '\0' || v == 0 || v > 86'400) {
      std::cerr << "guestflow run: --timeout expects seconds (1..86400), got '" << *t << "'\n";
      return 2;
    }
    req.timeout_seconds = static_cast<uint32_t>(v);
  }
  auto s = session::open(cp::process_environment(), watch);
  if (!s)
    return report_failure("run", s.error());
  auto& rt = (*s)->rt();
  auto queue = std::make_shared<event_queue>();
  auto sub = rt.system().spawn(subscriber, queue);
  caf::scoped_actor self{rt.system()};
  std::optional<result<std::string>> id;
  self->request(rt.coordinator(), std::chrono::seconds{60}, run_atom::value, std::move(req),
                sub, true)
    .receive([&](std::string& run_id) { id.emplace(std::move(run_id)); },
             [&](caf::error& e) { id.emplace(to_failure(e)); });
  if (!*id) {
    auto code = report_failure("run", id->error());
    caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
    return id->error().code == ec::bad_request ? 2 : code;
  }
  auto coordinator = rt.coordinator();
  auto run_id = **id;
  watch.on_signal([coordinator, run_id](int) {
    caf::anon_send(coordinator, cancel_atom::value, run_id);
  });
  bool events = a.has("events");
  bool vertex_failed = false;
  run_event last;
  for (;;) {
    last = queue->pop();
    if (events)
      std::cout << encode(last) << std::endl;
    else
      progress(last);
    vertex_failed |= last.type == run_event::kind::vertex_failed;
    if (last.terminal())
      break;
  }
  watch.on_signal({});
  caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
  if (last.type == run_event::kind::error)
    return last.code == ec::bad_request ? 2 : 1;
  if (!events) {
    if (a.has("json")) {
      std::cout << encode(last.run_outputs_list) << std::endl;
    } else {
      for (const auto& t : output_texts(last.run_outputs_list))
        std::cout << t << '\n';
      std::cout << std::flush;
    }
  }
  return vertex_failed ? 1 : 0;
}

const registrar reg{{"run", "run a whole flow graph in a fresh guest", usage, run_flow}};

} // namespace
} // namespace guestflow::cli
