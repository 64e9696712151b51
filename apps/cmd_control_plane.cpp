#include "apps/args.hpp"
#include "apps/command.hpp"
#include "common/numbers.hpp"
#include "controlplane/local/http/fault_injection.hpp"
#include "controlplane/local/serve.hpp"

#include <cstdlib>
#include <iostream>
#include <limits>
#include <mutex>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage =
    R"(usage: guestflow control-plane --state-dir DIR [--listen HOST:PORT] [--unix-socket PATH]
                                 [--api-key KEY] [--warm-pool SPEC]
                                 [--memory-budget-mb N] [--max-guests N] [--node NAME]
                                 [--fleet etcd://HOST:PORT[,…] [--advertise URL]
                                  [--fleet-ttl-seconds N] [--workspace-root DIR]]

Serves the CreateOS wire API v1 with real local guests (bubblewrap namespaces, cgroups,
netns egress rules). Prints `listening on http://HOST:PORT` as its first stdout line once
ready. SIGTERM/SIGINT stop the server; guests keep running and are re-adopted from the
records in DIR on the next start.

  --listen HOST:PORT     address to serve (default 127.0.0.1:0 = a free port)
  --unix-socket PATH     also serve on this Unix socket (absolute path, mode 0600,
                         removed at exit; a second stdout line `listening on
                         unix:///PATH`): clients on this host skip the TCP stack with
                         GUESTFLOW_CONTROL_PLANE_URL=unix:///PATH
  --state-dir DIR        records (control-plane.db, 0600), lock, guest workspaces
  --api-key KEY          require `X-Api-Key: KEY` on every request (default: the env
                         GUESTFLOW_CONTROL_PLANE_KEY); required for non-loopback addresses
  --max-stdout-bytes N   per exec call, default 16777216; past it output is discarded
  --max-stderr-bytes N   per exec call, default 1048576
  --max-file-bytes N     PUT …/files body limit (413 beyond), default 67108864
  --max-json-bytes N     JSON request body limit (413 beyond), default 1048576
  --workers N            threads for blocking guest/record work, default 4
  --warm-pool SPEC       keep guests built and never used, so that a create that matches
                         takes one instead of building it: SHAPE[@IMAGE][#EGRESS][+gvisor]=N or
                         =MIN..MAX (sized from demand), comma-separated (e.g.
                         s-1vcpu-256mb=4,s-1vcpu-1gb@py311#*=1..4; IMAGE defaults to
                         debian:12, EGRESS to none, * = allow all, else rules joined by |;
                         0, off or none: no pool, the default). A pool serves only creates
                         equal in shape, image, egress and the image's preload; its guests
                         are never listed, are lent (deleted) to a create that needs room,
                         and are deleted at SIGTERM/SIGINT (GET /v1/pool: counts)
  --memory-budget-mb N   memory the guests may commit: the sum of the shape memory of every
                         guest not destroyed (paused ones, creates in progress and the warm
                         pool's targets included); a create past it is refused with 429
                         `capacity` before anything is built. Default: 80% of MemTotal
  --max-guests N         guests this node holds at once (1..16384), default 1024; a create
                         past it is refused like one past the memory budget
  --node NAME            this node's name in GET /v1/capacity and the fleet (A-Z a-z 0-9
                         . _ -, at most 63), default the host name
  --destroyed-retention-hours H  keep the records of destroyed and failed guests this long
                         (a number, 0.5 = 30 min; 0 = until the next sweep), default 24
  --idle-timeout-seconds N  a request's header, and each read of its body, must arrive
                         within N s (else 408 and close); an idle connection closes after
                         N s. Default 120; a proxied service-URL connection closes
                         after N s with no byte moving either way
  --ingress-domain D     service URLs by Host too: `{port}-{id}.D` reaches port of guest id
                         at `/` (the path form /v1/sandboxes/{id}/ports/{port}/ always works)
  --max-ingress-connections N  proxied service-URL connections per guest (429 past it),
                         default 256
  --fleet etcd://HOST:PORT[,HOST:PORT…]  register this node in etcd under a lease and keep
                         its capacity record current (/guestflow/nodes/NAME); while it
                         cannot renew the lease it is fenced: creates are refused with
                         `capacity`, guests keep running (controlplane/local/README.md)
  --advertise URL        with --fleet: the http(s) URL runtimes reach this node at
                         (default: the URL it listens on)
  --fleet-ttl-seconds N  with --fleet: the lease's TTL (2..3600), default 10
  --workspace-root DIR   with --fleet: a directory every node shares; a named persistent
                         guest's workspace (and its spec) lives in DIR/NAME, owned by one
                         node at a time (an etcd key on its lease), and is cold-booted on
                         another node once its owner is lost and its lease expired

Test and bench only (not for production use):
  --heartbeat-ms N       streamed exec heartbeat interval, default 5000
  --auto-pause-scale X   multiplies auto_pause_after_seconds (0.01: 60 s → 0.6 s)
  --nft-path PATH        the nft binary (a missing one: egress rules unavailable, so
                         creates that need them are refused with 503)
  --simulate-latency-ms N  answer every call after N ms and start no guest at all (a
                         simulated domain: for measuring the runtime's own overhead)
  --simulate-exec-stdout FILE  with --simulate-latency-ms: every exec (buffered or
                         streamed) prints FILE's content on stdout, then exits 0 (e.g.
                         bench/bridge/prompt_frames.ndjson, a guest runner's frames, so that
                         whole-flow runs complete; default: no output)
  --faults SPEC          answer a share of calls wrongly (soaks; default: the env
                         GUESTFLOW_FAULTS, else off): OP:KIND=SHARE, OP in create, exec,
                         files, delete, pause, resume, list, get, any; KIND in 5xx, 429,
                         drop, timeout, lost; OP:delay=LO-HI[@SHARE]; seed=N; hold=D
                         (e.g. create:5xx=0.1,exec:drop=0.05,any:delay=0-300ms,seed=42).
                         Each fault is logged on stderr as `fault injected: OP KIND …`)";

/// A numeric flag into `out` (left alone when the flag is absent); false after saying why.
template<class T>
bool parse_number(const cli::args& a, const std::string& flag, T& out) {
  auto v = a.get(flag);
  if (!v) return true;
  auto n = parse_uint_as<T>(*v);
  if (!n) {
    std::cerr << "guestflow control-plane: "
              << uint_refusal("--" + flag, *v, 0, std::numeric_limits<T>::max()) << '\n';
    return false;
  }
  out = *n;
  return true;
}

/// `flag` as an integer within [min, max] into `out` (left alone when absent); false after
/// saying why.
template<class T>
bool parse_bounded(const cli::args& a, const std::string& flag, T& out, uint64_t min,
                   uint64_t max) {
  auto v = a.get(flag);
  if (!v) return true;
  auto n = parse_uint(*v, min, max);
  if (!n) {
    std::cerr << "guestflow control-plane: " << uint_refusal("--" + flag, *v, min, max) << '\n';
    return false;
  }
  out = static_cast<T>(*n);
  return true;
}

/// The capacity, retention and fleet flags into `o`; false after saying why (exit 2).
bool parse_capacity_flags(const cli::args& a, local::serve_options& o) {
  uint64_t ttl = o.fleet.ttl.count();
  uint64_t idle = o.http.idle_timeout.count();
  if (!parse_bounded(a, "memory-budget-mb", o.domain.capacity.memory_budget_mib, 1,
                     uint64_t{1} << 40) ||
      !parse_bounded(a, "max-guests", o.domain.capacity.max_guests, 1, local::max_max_guests) ||
      !parse_bounded(a, "fleet-ttl-seconds", ttl, 2, 3600) ||
      !parse_bounded(a, "idle-timeout-seconds", idle, 1, 86'400) ||
      !parse_bounded(a, "max-ingress-connections", o.http.max_ingress_connections, 1, 65'536))
    return false;
  if (auto domain = a.get("ingress-domain")) o.http.ingress_domain = *domain;
  o.fleet.ttl = std::chrono::seconds{ttl};
  o.http.idle_timeout = std::chrono::seconds{idle};
  if (auto node = a.get("node")) o.domain.node = *node;
  if (auto hours = a.get("destroyed-retention-hours")) {
    char* end = nullptr;
    double h = std::strtod(hours->c_str(), &end);
    if (end == hours->c_str() || *end != '\0' || !(h >= 0) || h > 876'000) {
      std::cerr << "guestflow control-plane: --destroyed-retention-hours: expected a number "
                   "of hours from 0 to 876000, got '"
                << *hours << "'\n";
      return false;
    }
    o.domain.destroyed_retention = std::chrono::seconds{static_cast<int64_t>(h * 3600)};
  }
  if (auto fleet = a.get("fleet")) o.fleet.etcd = *fleet;
  if (auto url = a.get("advertise")) o.fleet.advertise = *url;
  if (auto root = a.get("workspace-root")) o.domain.workspace_root = *root;
  for (const char* needs_fleet : {"advertise", "fleet-ttl-seconds", "workspace-root"})
    if (a.has(needs_fleet) && !a.has("fleet")) {
      std::cerr << "guestflow control-plane: --" << needs_fleet
                << " needs --fleet etcd://HOST:PORT\n";
      return false;
    }
  return true;
}

/// Installs `--faults SPEC` (else GUESTFLOW_FAULTS) when it asks for any fault; every
/// applied fault becomes a stderr line. 0, or 2 after saying why the spec is refused.
int install_faults_from(std::optional<std::string> flag) {
  const char* source = "--faults";
  if (!flag)
    if (const char* env = std::getenv("GUESTFLOW_FAULTS")) {
      flag = env;
      source = "GUESTFLOW_FAULTS";
    }
  if (!flag) return 0;
  auto plan = local::fault_plan::parse(*flag, source);
  if (!plan) {
    std::cerr << "guestflow control-plane: " << plan.error().message << '\n';
    return 2;
  }
  if (plan->empty()) return 0;
  std::cerr << "guestflow control-plane: injecting faults: " << plan->to_string() << std::endl;
  auto log = [mu = std::make_shared<std::mutex>()](const local::fault_event& e) {
    std::lock_guard<std::mutex> guard{*mu};
    std::cerr << local::describe(e) << std::endl;
  };
  local::install_faults(std::make_shared<local::fault_injector>(std::move(*plan), log));
  return 0;
}

int run_control_plane(const std::vector<std::string>& argv) {
  cli::args a{
      {"listen", "unix-socket", "state-dir", "api-key", "max-stdout-bytes", "max-stderr-bytes",
       "max-file-bytes", "max-json-bytes", "workers", "heartbeat-ms", "auto-pause-scale",
       "simulate-latency-ms", "simulate-exec-stdout", "nft-path", "warm-pool", "faults",
       // capacity, retention, fleet
       "memory-budget-mb", "max-guests", "node", "destroyed-retention-hours",
       "idle-timeout-seconds", "fleet", "advertise", "fleet-ttl-seconds", "workspace-root",
       // service URLs
       "ingress-domain", "max-ingress-connections"},
      {}};
  if (auto e = a.parse(argv)) {
    std::cerr << "guestflow control-plane: " << *e << "\n" << usage << '\n';
    return 2;
  }
  if (!a.positionals().empty()) {
    std::cerr << "guestflow control-plane: unexpected argument '" << a.positionals()[0]
              << "'\n";
    return 2;
  }
  local::serve_options o;
  o.listen = a.get("listen").value_or("127.0.0.1:0");
  o.state_dir = a.get("state-dir").value_or("");
  if (auto path = a.get("unix-socket")) o.unix_socket = *path;
  if (auto key = a.get("api-key"))
    o.http.api_key = *key;
  else if (const char* env = std::getenv("GUESTFLOW_CONTROL_PLANE_KEY"))
    o.http.api_key = env;
  uint64_t heartbeat_ms = 5000;
  uint32_t latency = 0;
  std::string scale_text = a.get("auto-pause-scale").value_or("1");
  if (!parse_number(a, "max-stdout-bytes", o.http.exec.max_stdout_bytes) ||
      !parse_number(a, "max-stderr-bytes", o.http.exec.max_stderr_bytes) ||
      !parse_number(a, "max-file-bytes", o.http.max_file_bytes) ||
      !parse_number(a, "max-json-bytes", o.http.max_json_bytes) ||
      !parse_number(a, "workers", o.workers) ||
      !parse_number(a, "heartbeat-ms", heartbeat_ms) ||
      !parse_number(a, "simulate-latency-ms", latency))
    return 2;
  o.http.heartbeat = std::chrono::milliseconds{std::max<uint64_t>(heartbeat_ms, 10)};
  if (auto nft = a.get("nft-path")) o.nft_path = *nft;
  if (auto spec = a.get("warm-pool")) {
    auto pool = local::parse_warm_pool_spec(*spec, "--warm-pool");
    if (!pool) {
      std::cerr << "guestflow control-plane: " << pool.error().message << '\n';
      return 2;
    }
    o.domain.warm_pool = std::move(*pool);
  }
  if (!parse_capacity_flags(a, o)) return 2;
  if (a.has("simulate-latency-ms")) o.simulate_latency_ms = latency;
  if (auto canned = a.get("simulate-exec-stdout")) o.simulate_exec_stdout = *canned;
  char* end = nullptr;
  o.domain.auto_pause_scale = std::strtod(scale_text.c_str(), &end);
  if (end == scale_text.c_str() || *end != '\0' || o.domain.auto_pause_scale <= 0) {
    std::cerr << "guestflow control-plane: --auto-pause-scale: expected a positive number\n";
    return 2;
  }
  // Fault injection (soaks): process-wide, installed before the server starts.
  if (auto faults = install_faults_from(a.get("faults")); faults != 0) return faults;
  return local::serve(o, std::cout, std::cerr);
}

const registrar reg{
    {"control-plane", "serve the wire API with local guests", usage, run_control_plane}};

} // namespace
} // namespace guestflow::cli
