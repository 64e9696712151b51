#include "actors/event_handoff.hpp"
#include "actors/message_store.hpp"
#include "actors/session_recorder.hpp"
#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "common/numbers.hpp"
#include "messages/flow_run.hpp"
#include "messages/result_text.hpp"

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <filesystem>
#include <iostream>
#include <map>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage =
    R"usage(usage: guestflow run FLOW.json|- [--input TEXT] [--output VERTEX]... [--json]
                     [--events] [--timeout S] [--executor auto|core|lfx] [--image NAME]
                     [--isolation KIND]
                     [--session-id ID] [--var NAME=VALUE]... [--var-from-env NAME]...

Runs a whole Langflow flow (an exported flow file, a Graph.dump(), or bare {nodes, edges};
"-" reads it from standard input) inside one fresh guest and deletes the guest afterwards.
Canvas notes are ignored. Progress goes to stderr as vertices build (✓ name 12 ms / ✗ name:
error; "name (id)" where display names repeat); stdout gets the final chat/text output, or
with --json the /api/v1/run-shaped body {"outputs":[RunOutputs], "executor"}, or for a
failed run {"error": {code, message}, "executor", "failed": [{id, name, error}]} (a failed
vertex stops the run as in Langflow: the message is Langflow's "Error building Component
…"), or with --events every run event as NDJSON as it happens (a streaming output's
`token` events and the stored `message`s included). --output selects the vertices (id or
display name) whose results are returned (default: every output vertex).

--executor: lfx runs Langflow's own engine and needs an image that has lfx (see guestflow
image add --python-env); core runs guestflow's built-in components and refuses, before any
vertex runs, a flow with a component it does not have; auto (default) takes lfx when the
guest has it. The terminal event and --json say which one ran. --image NAME selects the
guest image (CREATEOS_EXECUTOR_ROOTFS). --isolation KIND runs the flow in that kind of
guest: namespaces or gvisor (GUESTFLOW_ISOLATION; refused before the run, exit 2, where the
control plane does not offer it).

--session-id ID: the run's Langflow session (graph.session_id; 1-80 bytes, no control
characters), whose memory is the state dir's message store ($GUESTFLOW_STATE_DIR/messages,
one file per session): the session's earlier messages are the run's history (what Message
History reads) and the messages the run stores (Chat Input, Chat Output) are added to it as
they happen, so the next run with the same ID remembers them.

--var NAME=VALUE and --var-from-env NAME (both repeatable): secrets for the flow's
load_from_db fields (Langflow's global variables, e.g. an API key): shipped to the guest
apart from the flow, never printed, and replaced by ******** in everything the run prints.
A load_from_db field whose variable is not given fails the run before any vertex runs.
--var-from-env takes the value from this process's environment (exit 2 when it is not
set); prefer it for real secrets, since a --var value shows in the process list.

Exit status: 0 success, 1 a vertex or the run failed, 2 bad input, 130 cancelled (Ctrl-C).

Executor settings: CREATEOS_EXECUTOR_SHAPE (s-4vcpu-8gb), CREATEOS_EXECUTOR_TIMEOUT_SECONDS
(600), CREATEOS_EXECUTOR_EGRESS (*), CREATEOS_EXECUTOR_ROOTFS, CREATEOS_EXECUTOR_INSTALL_LFX,
CREATEOS_EXECUTOR_PIP, GUESTFLOW_RUNNER_EXECUTOR (auto), GUESTFLOW_ISOLATION (namespaces).)usage";

/// How progress lines name vertices: the display name, with the id beside it where two
/// vertices share a display name.
class vertex_labels {
public:
  explicit vertex_labels(const flow_graph& g) {
    for (auto& n : g.nodes)
      ++uses_[n.display_name];
  }

  std::string operator()(const run_event& e) const {
    if (e.name.empty()) return e.id;
    auto i = uses_.find(e.name);
    return i != uses_.end() && i->second > 1 ? e.name + " (" + e.id + ")" : e.name;
  }

private:
  std::map<std::string, size_t> uses_;
};

void progress(const run_event& e, const vertex_labels& label) {
  using k = run_event::kind;
  if (e.type == k::vertex_built)
    std::cerr << "✓ " << label(e) << ' ' << e.duration_ms << " ms\n";
  else if (e.type == k::vertex_failed)
    std::cerr << "✗ " << label(e) << ": " << e.message << '\n';
  else if (e.type == k::stdout_line)
    std::cerr << e.line << '\n';
  else if (e.type == k::error)
    std::cerr << "guestflow run: " << to_string(e.code) << ": " << e.message << '\n';
}

/// 2 for the caller's own mistakes, 130 for a cancelled run, 1 for every other failure.
int failed_run_status(ec code) {
  if (code == ec::bad_request) return 2;
  return code == ec::cancelled ? 130 : 1;
}

/// "1st", "2nd", …: which of a repeated option is meant, without echoing its value.
std::string ordinal(size_t n) {
  auto tens = n % 100;
  const char* suffix = tens >= 11 && tens <= 13 ? "th"
                       : n % 10 == 1            ? "st"
                       : n % 10 == 2            ? "nd"
                       : n % 10 == 3            ? "rd"
                                                : "th";
  return std::to_string(n) + suffix;
}

/// --var NAME=VALUE and --var-from-env NAME, in that order, as the run's variables; the
/// refusal names the option and the variable, never a value (nor an argument that may be
/// one: a malformed --var is named by its position).
std::optional<std::string> read_variables(const args& a, const cp::env_map& env,
                                          secret_vars& out) {
  auto add = [&out](std::string name, std::string value) -> std::optional<std::string> {
    if (out.contains(name)) return "variable " + name + " is given twice";
    out.set(std::move(name), std::move(value));
    return std::nullopt;
  };
  size_t n = 0;
  for (auto& arg : a.all("var")) {
    auto which = "the " + ordinal(++n) + " --var";
    auto eq = arg.find('=');
    if (eq == std::string::npos) return "--var expects NAME=VALUE; " + which + " has no '='";
    auto name = arg.substr(0, eq);
    if (!is_variable_name(name))
      return "--var expects NAME=VALUE with NAME of letters, digits and _ (not starting "
             "with a digit); " +
             which + "'s NAME is not one";
    if (auto refused = add(std::move(name), arg.substr(eq + 1))) return refused;
  }
  n = 0;
  for (auto& name : a.all("var-from-env")) {
    auto which = "the " + ordinal(++n) + " --var-from-env";
    if (!is_variable_name(name))
      return "--var-from-env expects a variable name (letters, digits and _, not starting "
             "with a digit); " +
             which + " is not one";
    auto i = env.find(name);
    if (i == env.end()) return "--var-from-env " + name + ": " + name + " is not set";
    if (auto refused = add(name, i->second)) return refused;
  }
  return std::nullopt;
}

/// The CLI's message store (spawned for a run with --session-id): its own thread, asked to
/// write everything it was sent before it is stopped.
class cli_message_store {
public:
  cli_message_store(caf::actor_system& sys, const cp::env_map& env)
      : sys_(sys)
      , store_(sys.spawn<caf::detached>(message_store,
                                        std::filesystem::path{state_dir(env)} / "messages",
                                        message_store_limits{})) {}
  ~cli_message_store() {
    caf::scoped_actor self{sys_};
    self->request(store_, std::chrono::seconds{60}, drain_atom::value)
        .receive([](bool) {},
                 [](caf::error& e) {
                   std::cerr << "guestflow run: the message store did not finish: "
                             << to_failure(e).message << '\n';
                 });
    caf::anon_send_exit(store_, caf::exit_reason::user_shutdown);
  }
  cli_message_store(const cli_message_store&) = delete;
  cli_message_store& operator=(const cli_message_store&) = delete;

  const message_store_actor& handle() const noexcept { return store_; }

private:
  caf::actor_system& sys_;
  message_store_actor store_;
};

int run_flow(const std::vector<std::string>& argv) {
  signal_watch watch;
  args a{{"input", "output", "timeout", "executor", "image", "isolation", "session-id", "var",
          "var-from-env"},
         {"json", "events"}};
  if (auto err = a.parse(argv); err || a.positionals().size() != 1) {
    std::cerr << "guestflow run: "
              << err.value_or("expected one FLOW.json (or - for standard input)") << "\n"
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
  if (auto input = a.get("input")) req.inputs = raw_json{quote_json(*input)};
  req.outputs = a.all("output");
  if (auto t = a.get("timeout")) {
    auto v = parse_uint_as<uint32_t>(*t, 1, 86'400);
    if (!v) {
      std::cerr << "guestflow run: " << uint_refusal("--timeout", *t, 1, 86'400)
                << " (seconds)\n";
      return 2;
    }
    req.timeout_seconds = *v;
  }
  if (auto ex = a.get("executor")) {
    if (!is_executor_name(*ex)) {
      std::cerr << "guestflow run: --executor expects auto, core or lfx, got '" << *ex << "'\n";
      return 2;
    }
    req.executor = *ex;
  }
  auto env = cp::process_environment();
  if (auto refused = read_variables(a, env, req.variables)) {
    std::cerr << "guestflow run: " << *refused << '\n';
    return 2;
  }
  if (auto id = a.get("session-id")) {
    if (auto refused = session_id_refusal(*id)) {
      std::cerr << "guestflow run: --session-id: " << refused->message << '\n';
      return 2;
    }
    req.session_id = *id;
  }
  if (auto image = a.get("image")) env["CREATEOS_EXECUTOR_ROOTFS"] = *image;
  if (auto kind = a.get("isolation")) env["GUESTFLOW_ISOLATION"] = *kind;
  vertex_labels label{req.graph};
  auto s = session::open(env, watch);
  if (!s) return report_failure("run", s.error());
  auto& rt = (*s)->rt();
  // The executor's guest is not placed by the sandbox policy: its kind is checked here, so a
  // kind the control plane does not offer is bad input before any guest exists.
  if (auto refused = policy::isolation_refusal(rt.options().coordinator.settings.isolation,
                                               (*s)->provider())) {
    report_failure("run", *refused);
    return 2;
  }
  caf::scoped_actor self{rt.system()};
  std::optional<cli_message_store> store;
  if (req.session_id) {
    store.emplace(rt.system(), env);
    std::optional<failure> refused;
    self->request(store->handle(), std::chrono::seconds{60}, get_atom::value, std::move(req))
        .receive([&](run_request& filled) { req = std::move(filled); },
                 [&](caf::error& e) { refused = to_failure(e); });
    if (refused) {
      report_failure("run", *refused);
      return failed_run_status(refused->code);
    }
  }
  auto queue = std::make_shared<run_event_queue>();
  run_subscriber_actor sub = rt.system().spawn(event_handoff, queue);
  // The session's messages are stored as the run goes: the recorder stands in front of
  // the handoff (and quits with it).
  auto first = store ? run_subscriber_actor{rt.system().spawn(session_recorder, store->handle(),
                                                              *req.session_id, sub, true)}
                     : sub;
  std::optional<result<std::string>> id;
  self->request(rt.coordinator(), std::chrono::seconds{60}, run_atom::value, std::move(req),
                first, true)
      .receive([&](std::string& run_id) { id.emplace(std::move(run_id)); },
               [&](caf::error& e) { id.emplace(to_failure(e)); });
  if (!*id) {
    report_failure("run", id->error());
    caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
    return failed_run_status(id->error().code);
  }
  auto coordinator = rt.coordinator();
  auto run_id = **id;
  watch.on_signal(
      [coordinator, run_id](int) { caf::anon_send(coordinator, cancel_atom::value, run_id); });
  bool events = a.has("events");
  std::vector<failed_vertex> failed;
  run_event last;
  for (;;) {
    last = queue->pop();
    if (events)
      std::cout << encode(last) << std::endl;
    else
      progress(last, label);
    if (last.type == run_event::kind::vertex_failed)
      failed.push_back({last.id, last.name, last.message});
    if (last.terminal()) break;
  }
  watch.on_signal({});
  caf::anon_send_exit(sub, caf::exit_reason::user_shutdown);
  if (a.has("json") && !events) std::cout << encode_run_body(last, failed) << std::endl;
  if (last.type == run_event::kind::error) return failed_run_status(last.code);
  if (!events && !a.has("json")) {
    for (const auto& t : output_texts(last.run_outputs_list))
      std::cout << t << '\n';
    std::cout << std::flush;
  }
  return failed.empty() ? 0 : 1;
}

const registrar reg{{"run", "run a whole flow graph in a fresh guest", usage, run_flow}};

} // namespace
} // namespace guestflow::cli
