#include "apps/cli_session.hpp"

#include "actors/executor_settings.hpp"
#include "actors/guest_names.hpp"
#include "actors/sweep_waiter.hpp"
#include "actors/system_settings.hpp"
#include "apps/embedded_start.hpp"
#include "apps/wait_turn.hpp"
#include "common/unique_fd.hpp"
#include "controlplane/client/observed_client.hpp"
#include "controlplane/local/embedded.hpp"
#include "messages/type_ids.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <spdlog/spdlog.h>
#include <sstream>
#include <unistd.h>

namespace guestflow::cli {
namespace {

using namespace std::chrono_literals;

/// Blocks on one client call (startup only: capabilities and the shape catalog).
template<class T, class Start>
result<T> await(Start&& start) {
  auto p = std::make_shared<std::promise<result<T>>>();
  auto f = p->get_future();
  start([p](result<T> r) { p->set_value(std::move(r)); });
  return f.get();
}

struct session_config : caf::actor_system_config {
  session_config() { apply_runtime_settings(*this); }
};

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

/// One spelling per state dir ("/x", "/x/", "/x/./"), for the owner id derived from it.
std::string one_spelling(const std::string& dir) {
  std::error_code err;
  auto abs = std::filesystem::absolute(dir, err);
  auto out = (err ? std::filesystem::path{dir} : abs).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/')
    out.pop_back();
  return out;
}

} // namespace

result<std::string> read_bytes(const std::string& path) {
  auto fd = path == "-" ? ::dup(STDIN_FILENO) : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto why = [&path](int err) {
    return fail(ec::bad_request, "cannot read " +
                                     (path == "-" ? std::string{"standard input"} : path) +
                                     ": " + std::strerror(err));
  };
  if (fd < 0) return why(errno);
  unique_fd owned{fd};
  std::string out;
  char chunk[65536];
  for (;;) {
    auto n = ::read(fd, chunk, sizeof chunk);
    if (n == 0) return out;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why(errno); // EISDIR for a directory
    out.append(chunk, static_cast<size_t>(n));
  }
}

std::string state_dir(const cp::env_map& env) {
  if (auto i = env.find("GUESTFLOW_STATE_DIR"); i != env.end() && !i->second.empty())
    return i->second;
  auto home = env.find("HOME");
  return (home != env.end() && !home->second.empty() ? home->second : std::string{"/root"}) +
         "/.local/state/guestflow";
}

int exit_status(ec code) {
  return code == ec::cancelled ? 130 : 125;
}

int report_failure(const char* what, const failure& f) {
  std::cerr << "guestflow " << what << ": " << to_string(f.code) << ": " << f.message << '\n';
  return exit_status(f.code);
}

int status_after_cut(const char* what, const output_cut& cut, bool allowed, int status) {
  if (!cut.any()) return status;
  std::cerr << "guestflow " << what << ": the program's " << describe(cut)
            << " was cut at the control plane's output cap (truncated); what came back is "
               "not its whole output"
            << (allowed ? "" : " (--allow-truncated accepts a cut output)") << '\n';
  return allowed ? status : 125;
}

result<std::unique_ptr<session>> session::open(const cp::env_map& env, signal_watch& watch,
                                               call_latency* latency, start_sweep sweep,
                                               local::warm_pool_default pool,
                                               busy_state_dir busy) {
  return open_with(env, watch, latency, sweep, pool, busy, nullptr);
}

result<std::unique_ptr<session>>
session::open_admitted(const cp::env_map& env, signal_watch& watch,
                       const policy::sandbox_settings& settings) {
  return open_with(env, watch, nullptr, start_sweep::on, local::warm_pool_default::none,
                   busy_state_dir::wait, &settings);
}

result<std::unique_ptr<session>> session::open_with(const cp::env_map& env, signal_watch& watch,
                                                    call_latency* latency, start_sweep sweep,
                                                    local::warm_pool_default pool,
                                                    busy_state_dir busy,
                                                    const policy::sandbox_settings* gate) {
  std::unique_ptr<session> s{new session(watch)};
  // A CLI run prints the program's output; the embedded server's chatter stays out of it.
  spdlog::set_level(env.count("GUESTFLOW_DEBUG") ? spdlog::level::debug : spdlog::level::warn);
  // Malformed settings are refused before anything starts.
  auto floor = policy::env_uint(env, "GUESTFLOW_LOCAL_MEMORY_FLOOR_MB", 0, 1 << 20);
  if (!floor) return floor.error();
  auto grace = policy::env_uint(env, "GUESTFLOW_SWEEP_GRACE_SECONDS", 0, UINT32_MAX);
  if (!grace) return grace.error();
  auto pool_env = env.count("GUESTFLOW_WARM_POOL")
                      ? std::optional<std::string>{env.at("GUESTFLOW_WARM_POOL")}
                      : std::nullopt;
  // A long-lived host's default pools: the sandbox guest its settings give runs (when it
  // is the default one) and its executor's guest. Malformed settings are refused below.
  local::host_guests guests;
  if (pool == local::warm_pool_default::host) {
    auto sandbox = policy::settings_from_env(env);
    guests.sandbox = sandbox && policy::default_local_guest(*sandbox);
    // The executor's pool is of its own kind: a gVisor executor's creates take gVisor guests.
    auto ex = executor_settings_from_env(env);
    auto kind = ex && ex->isolation ? local::isolation_from_string(*ex->isolation)
                                    : std::optional{local::guest_isolation::namespaces};
    if (ex && kind) {
      local::pool_key key;
      key.shape = ex->shape;
      key.image = ex->rootfs.value_or("debian:12");
      key.egress = ex->egress;
      key.isolation = *kind;
      guests.executor = std::move(key);
    }
  }
  auto warm_pool = local::embedded_warm_pool(pool_env, pool, guests);
  if (!warm_pool) return warm_pool.error();
  auto choice = cp::select_endpoint(env);
  if (!choice) return choice.error();
  cp::endpoint ep;
  auto dir = state_dir(env);
  // Waiting for another guestflow (one on the embedded state dir, or a sweep holding the
  // owner's lease): a wait the user notices is one the user is told about, and a signal
  // (SIGINT/SIGTERM) ends it.
  auto stop_waiting = waiting_notice(watch, dir);
  auto cancelled_while_waiting =
      fail(ec::cancelled, "run cancelled while waiting for another guestflow using " + dir);
  auto owner_env = env.count("GUESTFLOW_OWNER") ? env.at("GUESTFLOW_OWNER") : std::string{};
  auto owner = names::owner_id(owner_env, host_name(), one_spelling(dir));
  // Only what wait_turn answers when told to stop at once (never a real start failure).
  auto busy_dir = fail(ec::cancelled, "the embedded state dir " + dir + " is held elsewhere");
  if (std::holds_alternative<cp::endpoint>(*choice)) {
    ep = std::get<cp::endpoint>(*choice);
  } else {
    local::serve_options opts;
    opts.state_dir = dir;
    opts.domain.warm_pool = std::move(*warm_pool);
    auto started = busy == busy_state_dir::refuse
                       ? start_embedded(
                             std::move(opts), [] { return true; }, busy_dir)
                       : start_embedded(std::move(opts), stop_waiting, cancelled_while_waiting);
    if (!started && busy == busy_state_dir::refuse && started.error() == busy_dir)
      return owner_lease::owner_busy(owner, owner_lease::path_for(dir, owner));
    if (!started) return started.error();
    s->embedded_ = std::move(*started);
    ep.base_url =
        s->embedded_->unix_url().empty() ? s->embedded_->url() : s->embedded_->unix_url();
    ep.kind = cp::provider::local;
  }
  auto client = cp::client::make(ep);
  if (!client) return client.error();
  if (latency) *client = cp::observed(std::move(*client), *latency);
  auto caps =
      await<capabilities>([&](auto cb) { (*client)->capabilities_of(10s, std::move(cb)); });
  if (!caps)
    return fail(ec::unavailable,
                "control plane at " + ep.base_url + " cannot be used: " + caps.error().message);
  if (ep.kind == cp::provider::createos) {
    s->provider_ = policy::createos_provider();
  } else {
    s->provider_.kind = cp::provider::local;
    s->provider_.caps = *caps;
    s->provider_.memory_floor_mib = floor->value_or(256);
  }
  // Before the lease, the actor system and the start sweep (whose listing is a request).
  if (gate)
    if (auto admitted = policy::admit(*gate, s->provider_); !admitted) return admitted.error();
  s->owner_ = owner;
  auto lease = wait_turn<owner_lease>([&] { return owner_lease::try_take(dir, s->owner_); },
                                      stop_waiting, cancelled_while_waiting);
  if (lease)
    s->lease_.emplace(std::move(*lease));
  else if (watch.received())
    return lease.error();
  else // runs still run; only sweeps, which need to know who else is live, cannot
    s->no_lease_ = std::move(lease).error().message;
  s->cfg_ = std::make_unique<session_config>();
  s->sys_ = std::make_unique<caf::actor_system>(*s->cfg_);
  runtime_options ro;
  ro.owner = s->owner_;
  auto executor = executor_settings_from_env(env);
  if (!executor) return executor.error();
  ro.coordinator.settings = std::move(*executor);
  s->rt_ = std::make_unique<runtime>(*s->sys_, std::move(*client), ro);
  // Guests of this owner that an earlier, crashed run left behind (older than the grace
  // period) go now, unless another process of the owner is live: its guests are not
  // orphans, and the sweep waits for a start with none.
  if (sweep == start_sweep::on && s->lease_ && s->lease_->exclusive()) {
    // Alone: the lease stays exclusive until the sweep has listed, so that no sibling
    // starts (and creates) in between; the sweep goes on in the background.
    auto* lease = &*s->lease_; // outlives the actor system (declared before it)
    s->sweep_waiter_ = s->sys_->spawn(sweep_waiter, [lease] { lease->share(); });
    // Sent from here, so the sweep is in the reaper's mailbox before any later drain (which
    // then waits for it); its answer goes to the waiter.
    caf::send_as(s->sweep_waiter_, s->rt_->reaper(), sweep_atom::value,
                 static_cast<uint32_t>(grace->value_or(3600)));
  } else if (sweep == start_sweep::on) {
    spdlog::debug("owner {}: another process is live (or no lease): no sweep at start",
                  s->owner_);
  }
  return s;
}

session::session(signal_watch& watch)
    : watch_(watch) {}

session::~session() {
  watch_.on_signal({});
  if (rt_) {
    drain();
    rt_->stop();
  }
  // A sweep the stopped reaper never answered: the lease goes with the process.
  if (sweep_waiter_) caf::anon_send_exit(sweep_waiter_, caf::exit_reason::user_shutdown);
  rt_.reset();
  sys_.reset();
  if (embedded_) embedded_->stop();
}

result<shape_list> session::catalog() {
  if (!catalog_) {
    auto client = rt_->client();
    auto shapes = await<shape_list>([&](auto cb) { client->shapes(30s, std::move(cb)); });
    if (!shapes)
      return fail(ec::unavailable, "control plane at " + client->where().base_url +
                                       " gave no shape catalog: " + shapes.error().message);
    catalog_ = std::move(*shapes);
  }
  return *catalog_;
}

result<execution_report> session::run(execution_spec spec) {
  return run_on(rt_->spawn_execution(), std::move(spec));
}

result<execution_report> session::run(component_plan plan) {
  return run_on(rt_->spawn_component(plan), std::move(plan.spec));
}

result<execution_report> session::run(execution_spec spec, exec_sink_actor listener) {
  auto opts = rt_->options().execution;
  opts.listener = std::move(listener);
  spec.stream = true;
  return run_on(rt_->spawn_execution(std::move(opts)), std::move(spec));
}

template<class T, class Handle, class... Ts>
result<T> session::ask(const Handle& dest, caf::duration limit, Ts&&... xs) {
  caf::scoped_actor self{*sys_};
  std::optional<result<T>> out;
  self->request(dest, limit, std::forward<Ts>(xs)...)
      .receive([&](T& x) { out.emplace(std::move(x)); },
               [&](caf::error& e) { out.emplace(to_failure(e)); });
  return std::move(*out);
}

result<execution_report> session::run_on(execution_actor exec, execution_spec spec) {
  watch_.on_signal([exec](int) { caf::anon_send(exec, cancel_atom::value); });
  // The execution's own deadlines bound this; the margin covers create and delete.
  caf::duration limit{std::chrono::seconds{spec.timeout_seconds} + 10min};
  auto out = ask<execution_report>(exec, limit, run_atom::value, std::move(spec));
  watch_.on_signal({});
  return out;
}

result<uint64_t> session::sweep(uint32_t older_than_s) {
  if (!lease_)
    return fail(ec::unavailable, "cannot tell whether another guestflow process of owner " +
                                     owner_ +
                                     " is running, so nothing was deleted: " + no_lease_);
  if (!lease_->exclusive()) return owner_lease::owner_busy(owner_, lease_->path());
  return ask<uint64_t>(rt_->reaper(), caf::duration{5min}, sweep_atom::value, older_than_s);
}

result<uint64_t> session::sweep_reusable(uint32_t idle_s) {
  return ask<uint64_t>(rt_->registry(), caf::duration{5min}, sweep_atom::value, idle_s);
}

uint64_t session::drain() {
  auto pending = ask<uint64_t>(rt_->reaper(), caf::duration{5min}, drain_atom::value);
  return pending ? *pending : 1;
}

} // namespace guestflow::cli
