#include "actors/component_spec.hpp"
#include "actors/message_store.hpp"
#include "actors/session_manager.hpp"
#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/sessions.hpp"
#include "common/fd_limit.hpp"
#include "common/net_address.hpp"

#include <caf/exit_reason.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sys/resource.h>
#include <thread>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage =
    R"(usage: guestflow serve [--listen HOST:PORT] [--token T] [--isolation KIND]

One long-lived runtime for every Langflow worker on this node, over HTTP (bridge/API.md):
POST /v1/runs (whole flows, NDJSON events as they happen), GET /v1/runs/{id}/events
(join late), DELETE /v1/runs/{id}, POST /v1/sandbox/run, POST /v1/components/run,
GET /v1/capabilities, GET /healthz, GET /metrics (Prometheus). Prints
`listening on http://HOST:PORT` as its first stdout line once ready. SIGINT/SIGTERM stop
accepting, end every run in flight with `unavailable` ("server shutting down": a stream's
terminal event, else a 503 answer), delete every ephemeral guest and exit 0 — within
GUESTFLOW_SHUTDOWN_SECONDS (30), else exit 125 leaving what is still owed to the next
start's sweep.

  --listen HOST:PORT   default 127.0.0.1:8470 (port 0: a free one)
  --token T            require `Authorization: Bearer T` on every route but /healthz
                       (default: GUESTFLOW_TOKEN); required on a non-loopback address
  --isolation KIND     the kind of every guest it creates (flows, sandbox and component
                       runs, sessions): namespaces or gvisor (default: GUESTFLOW_ISOLATION,
                       else namespaces); exit 2 at start where the control plane lacks it

Environment: GUESTFLOW_MAX_BODY_BYTES (67108864), GUESTFLOW_CLIENT_TIMEOUT_SECONDS (30: a
request must arrive, and a streamed line leave, within it), GUESTFLOW_STREAM_BACKLOG_BYTES
(8388608: a stream's client that falls further behind is dropped; its run goes on),
GUESTFLOW_STREAM_HEARTBEAT_SECONDS (15: a blank line on a stream quiet that long),
GUESTFLOW_SERVE_IO_THREADS (1), GUESTFLOW_SHUTDOWN_SECONDS (30),
GUESTFLOW_RUN_LIMIT_SECONDS (a sandbox or component run longer is answered 503 `transient`
and cancelled; default its timeout_seconds + 10 min); GUESTFLOW_WARM_POOL (the embedded control plane's warm
pool, --warm-pool's syntax SHAPE[@IMAGE][#EGRESS][+gvisor]=N|MIN..MAX,…; unset: 2..8 s-1vcpu-256mb
guests with 4 GiB MemAvailable, 1..4 with 2 GiB, none below, and none when LANGFLOW_SANDBOX_*
or CREATEOS_SANDBOX_* ask for another guest (network, a shape, an image, more memory); and
1..N of the flow executor's guest (CREATEOS_EXECUTOR_SHAPE, _ROOTFS, _EGRESS), N what half of
MemAvailable holds, at most 8; 0 turns it off); the control plane as for every
command; Langflow's
LANGFLOW_SANDBOX_* as the defaults of /v1/sandbox/run and /v1/components/run; the executor's
CREATEOS_EXECUTOR_* for flow runs; GUESTFLOW_MAX_INFLIGHT (runs holding a guest at once,
flows, sandbox and component runs together; default: the host's memory budget in 256 MiB
guests) and GUESTFLOW_MAX_QUEUED (flow runs that may wait, default 0): beyond them a run
is refused at once with 429 `capacity`.)";

/// An unsigned setting from the environment within [lo, hi] (policy::env_uint's rule);
/// `fallback` when unset, bad_request naming it when malformed.
template<class T>
result<T> env_number(const cp::env_map& env, const char* name, T fallback, T lo, T hi) {
  auto v = policy::env_uint(env, name, lo, hi);
  if (!v) return v.error();
  return v->has_value() ? static_cast<T>(**v) : fallback;
}

result<bridge::server_options> server_options_from(const cp::env_map& env, std::string token) {
  bridge::server_options o;
  o.token = std::move(token);
  auto body = env_number<uint64_t>(env, "GUESTFLOW_MAX_BODY_BYTES", o.max_body_bytes, 1024,
                                   uint64_t{1} << 32);
  auto timeout = env_number<uint32_t>(env, "GUESTFLOW_CLIENT_TIMEOUT_SECONDS", 30, 1, 3600);
  auto backlog = env_number<uint64_t>(env, "GUESTFLOW_STREAM_BACKLOG_BYTES",
                                      o.stream_backlog_bytes, 4096, uint64_t{1} << 32);
  auto threads = env_number<unsigned>(env, "GUESTFLOW_SERVE_IO_THREADS", 1, 1, 64);
  auto heartbeat = env_number<uint32_t>(env, "GUESTFLOW_STREAM_HEARTBEAT_SECONDS", 15, 1, 3600);
  auto port_ttl =
      env_number<uint32_t>(env, "GUESTFLOW_PORT_URL_TTL_SECONDS", 3600, 1, 31'536'000);
  for (auto* f :
       {body ? nullptr : &body.error(), timeout ? nullptr : &timeout.error(),
        backlog ? nullptr : &backlog.error(), threads ? nullptr : &threads.error(),
        heartbeat ? nullptr : &heartbeat.error(), port_ttl ? nullptr : &port_ttl.error()})
    if (f) return *f;
  o.port_url_ttl = std::chrono::seconds{*port_ttl};
  if (auto u = env.find("GUESTFLOW_PUBLIC_URL"); u != env.end()) o.public_url = u->second;
  o.heartbeat = std::chrono::seconds{*heartbeat};
  o.max_body_bytes = *body;
  o.client_timeout = std::chrono::seconds{*timeout};
  o.stream_backlog_bytes = static_cast<size_t>(*backlog);
  o.io_threads = *threads;
  return o;
}

/// GUESTFLOW_SHUTDOWN_SECONDS: how long a stop may take from the signal to the exit.
result<std::chrono::seconds> shutdown_bound(const cp::env_map& env) {
  auto v = env_number<uint32_t>(env, "GUESTFLOW_SHUTDOWN_SECONDS", 30, 1, 3600);
  if (!v) return v.error();
  return std::chrono::seconds{*v};
}

/// Ends the process once `bound` has passed, whatever the stop still waits for (a control
/// plane that stopped answering deletes): a supervisor's stop must not hang. What is still
/// owed is the next start's sweep.
void exit_after(std::chrono::seconds bound) {
  std::thread([bound] {
    std::mutex mu;
    std::condition_variable never;
    std::unique_lock<std::mutex> guard{mu};
    never.wait_for(guard, bound, [] { return false; });
    std::cerr << "guestflow serve: the stop took longer than " << bound.count()
              << " s (GUESTFLOW_SHUTDOWN_SECONDS); exiting with guest deletes still owed "
                 "(the next start sweeps them)\n";
    std::_Exit(125);
  }).detach();
}

/// The graceful stop: no new connection or request, every run ended with `unavailable`
/// (its answer written: a stream's terminal event, a 503), within `bound`.
void stop_serving(bridge::server& srv, bridge::service& svc, std::chrono::seconds bound) {
  srv.begin_shutdown();
  svc.shutdown();
  auto deadline = std::chrono::steady_clock::now() + bound;
  std::mutex mu;
  std::condition_variable tick;
  std::unique_lock<std::mutex> guard{mu};
  // Polled: the answers are written on the server's threads and the runs end on actor
  // threads; neither has a reason to know about this one.
  while ((svc.live_calls() > 0 || srv.answers_owed() > 0) &&
         std::chrono::steady_clock::now() < deadline)
    tick.wait_for(guard, std::chrono::milliseconds{20});
}

/// Blocks until SIGINT/SIGTERM.
void wait_for_signal(signal_watch& watch) {
  std::mutex mu;
  std::condition_variable cv;
  bool signalled = false;
  watch.on_signal([&](int) {
    std::lock_guard<std::mutex> guard{mu};
    signalled = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> guard{mu};
  cv.wait(guard, [&] { return signalled; });
  guard.unlock();
  watch.on_signal({});
}

int run_serve(const std::vector<std::string>& argv) {
  signal_watch watch; // first: every thread created later inherits the blocked signals
  args a{{"listen", "token", "isolation"}, {}};
  if (auto err = a.parse(argv); err || !a.positionals().empty()) {
    std::cerr << "guestflow serve: " << err.value_or("unexpected arguments") << "\n"
              << usage << '\n';
    return 2;
  }
  auto env = cp::process_environment();
  if (auto kind = a.get("isolation")) env["GUESTFLOW_ISOLATION"] = *kind;
  std::string why;
  auto listen = parse_host_port(a.get("listen").value_or("127.0.0.1:8470"), &why);
  if (!listen) {
    report_failure("serve", fail(ec::bad_request, "--listen: " + why));
    return 2;
  }
  auto token = a.get("token").value_or(env.count("GUESTFLOW_TOKEN") ? env["GUESTFLOW_TOKEN"]
                                                                    : std::string{});
  if (token.empty() && !listen->loopback) {
    report_failure("serve", fail(ec::policy_refused,
                                 "refusing to listen on non-loopback address " + listen->host +
                                     " without a token; pass --token or GUESTFLOW_TOKEN"));
    return 2;
  }
  auto opts = server_options_from(env, token);
  auto defaults = policy::settings_from_env(env);
  auto cap = artifact_cap_from_env(env);
  auto bound = shutdown_bound(env);
  auto run_limit = env_number<uint32_t>(env, "GUESTFLOW_RUN_LIMIT_SECONDS", 0, 1, 86'400);
  for (auto* f : {opts ? nullptr : &opts.error(), defaults ? nullptr : &defaults.error(),
                  cap ? nullptr : &cap.error(), bound ? nullptr : &bound.error(),
                  run_limit ? nullptr : &run_limit.error()})
    if (f) {
      report_failure("serve", *f);
      return 2;
    }
  raise_fd_limit();
  call_latency latency; // outlives the session, which records into it
  opts->cp_latency = &latency;
  // A long-lived host: its embedded control plane keeps small warm pools by default — of
  // the sandbox guest the default settings give a run (settings that ask for another guest
  // would leave that pool unused) and of the flow executor's guest (local::host_guests).
  auto s = session::open(env, watch, &latency, session::start_sweep::on,
                         local::warm_pool_default::host);
  if (!s) return report_failure("serve", s.error());
  auto& sess = **s;
  auto catalog = sess.catalog();
  if (!catalog) return report_failure("serve", catalog.error());
  // Every run would be refused: a kind the control plane lacks is refused at start.
  if (auto refused = policy::isolation_refusal(defaults->isolation, sess.provider())) {
    report_failure("serve", *refused);
    return 2;
  }
  // The memory of runs that name a session_id and bring no history (bridge/API.md): one
  // thread of its own for its file I/O; what it was sent is written before it stops.
  auto& sys = sess.rt().system();
  message_store_actor messages = sys.spawn<caf::detached>(
      message_store, std::filesystem::path{state_dir(env)} / "messages",
      message_store_limits{});
  struct stop_messages {
    caf::actor_system& sys;
    message_store_actor& a;
    ~stop_messages() {
      caf::scoped_actor self{sys};
      self->request(a, std::chrono::seconds{10}, drain_atom::value)
          .receive([](bool) {}, [](caf::error&) {});
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    }
  } stop_messages_at_exit{sys, messages};
  bridge::service svc{
      sess.rt(),
      {sess.provider(), *catalog, *defaults, *cap, sess.owner(), messages, *run_limit}};
  // -- agent sessions: the manager's guests are the reaper's too, so the drain at exit
  // deletes every one of them --
  auto session_opts = session_options_from_env(env);
  if (!session_opts) return report_failure("serve", session_opts.error());
  session_opts->owner = sess.owner();
  session_opts->settings = *defaults;
  session_opts->provider = sess.provider();
  session_opts->catalog = *catalog;
  auto sessions = sess.rt().system().spawn(session_manager, sess.rt().controlplane(),
                                           sess.rt().reaper(), std::move(*session_opts));
  bridge::session_gateway session_gw{sess.rt().system(), sessions};
  opts->sessions = &session_gw;
  struct stop_sessions {
    session_manager_actor& a;
    ~stop_sessions() { caf::anon_send_exit(a, caf::exit_reason::user_shutdown); }
  } stop_sessions_at_exit{sessions};
  // -- end agent sessions --
  bridge::metrics stats;
  std::optional<bridge::server> srv;
  try {
    srv.emplace(svc, stats, std::move(*opts), *listen);
  } catch (const std::exception& e) {
    return report_failure(
        "serve", fail(ec::unavailable, "cannot listen on " + listen->host + ": " + e.what()));
  }
  srv->start();
  std::cout << "listening on http://" << srv->local_address().to_string() << std::endl;
  wait_for_signal(watch);
  exit_after(*bound);
  // Running session commands end with unavailable too (their answers are owed).
  caf::anon_send(sessions, drain_atom::value);
  stop_serving(*srv, svc, *bound);
  srv.reset(); // every answer owed is out (or the bound passed)
  return 0;    // the session drains the reaper: every ephemeral guest is deleted
}

const registrar reg{{"serve", "serve the HTTP bridge for Langflow (runs, sandbox, components)",
                     usage, run_serve}};

} // namespace
} // namespace guestflow::cli
