#pragma once

#include "actors/runtime.hpp"
#include "actors/sandbox_policy.hpp"
#include "apps/owner_lease.hpp"
#include "apps/signal_watch.hpp"
#include "controlplane/client/endpoint_selection.hpp"
#include "controlplane/local/embedded.hpp"
#include "messages/call_latency.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/duration.hpp>
#include <memory>
#include <optional>
#include <random>
#include <string>

namespace guestflow::cli {

/// One CLI invocation's runtime: the control plane chosen from the environment (the
/// embedded local one when none is configured), an actor system, the runtime's actors,
/// and the provider facts the policy gate needs. Blocking is fine here — this is apps/.
class session {
public:
  /// Whether opening a session sweeps the owner's orphans older than
  /// GUESTFLOW_SWEEP_GRACE_SECONDS (in the background, and only while no other process of
  /// the owner is live); `guestflow reap` sweeps with its own age instead.
  enum class start_sweep { on, off };

  /// What opening does when another guestflow holds the embedded state dir: wait its turn
  /// (runs), or refuse at once with the owner-busy failure (`reap`: that process's guests
  /// are live, so there is nothing to wait for).
  enum class busy_state_dir { wait, refuse };

  /// `watch` must outlive the session; its signals cancel what the session runs. With
  /// `latency`, every control-plane call's latency is recorded there (it must outlive the
  /// session). `pool`: the embedded control plane's warm pool when GUESTFLOW_WARM_POOL is
  /// unset (local::warm_pool_default says which command gets which).
  static result<std::unique_ptr<session>>
  open(const cp::env_map& env, signal_watch& watch, call_latency* latency = nullptr,
       start_sweep sweep = start_sweep::on,
       local::warm_pool_default pool = local::warm_pool_default::none,
       busy_state_dir busy = busy_state_dir::wait);
  /// open() for a sandbox run: its policy (`settings` against the provider's facts) is
  /// decided as soon as those are known, before the owner's lease, the actor system and the
  /// start sweep. CreateOS's facts are known without a request, so a run refused there
  /// (network off, a hostname allowlist) makes no request at all and changes no state.
  static result<std::unique_ptr<session>>
  open_admitted(const cp::env_map& env, signal_watch& watch,
                const policy::sandbox_settings& settings);
  ~session();

  runtime& rt() { return *rt_; }
  const policy::provider_info& provider() const { return provider_; }
  /// The shape catalog, fetched on first use (so a policy refusal needs no request).
  result<shape_list> catalog();
  const std::string& owner() const { return owner_; }
  std::mt19937_64& rng() { return rng_; }

  /// Runs one execution to the end. SIGINT/SIGTERM cancel it; the guest is deleted
  /// either way before this returns.
  result<execution_report> run(execution_spec spec);
  /// A component run (reusable guests through the registry, artifacts collected).
  result<execution_report> run(component_plan plan);
  /// Runs one streamed execution whose output lines go to `listener` as they arrive
  /// (the report then carries no stdout or stderr).
  result<execution_report> run(execution_spec spec, exec_sink_actor listener);

  /// Deletes this runtime's orphaned guests older than `older_than_s`; returns how many.
  /// Refused (`unavailable`, nothing deleted) while another process of the owner is live:
  /// its guests are not orphans. Holds the owner's lease alone from then on.
  result<uint64_t> sweep(uint32_t older_than_s);

  /// Deletes reusable gf-c- guests idle longer than `idle_s`; returns how many.
  result<uint64_t> sweep_reusable(uint32_t idle_s);

  /// Waits until the reaper owes nothing (or its deadline); returns what is still owed.
  uint64_t drain();

private:
  explicit session(signal_watch& watch);

  /// open(), asking policy::admit(*gate, provider) first when `gate` is set.
  static result<std::unique_ptr<session>> open_with(const cp::env_map& env, signal_watch& watch,
                                                    call_latency* latency, start_sweep sweep,
                                                    local::warm_pool_default pool,
                                                    busy_state_dir busy,
                                                    const policy::sandbox_settings* gate);

  /// Runs `spec` on `exec` (see run).
  result<execution_report> run_on(execution_actor exec, execution_spec spec);

  /// One blocking request to `dest`, its answer or its failure.
  template<class T, class Handle, class... Ts>
  result<T> ask(const Handle& dest, caf::duration limit, Ts&&... xs);

  signal_watch& watch_;
  std::optional<owner_lease> lease_; ///< released last, once the reaper has drained
  std::string no_lease_;             ///< why there is none (sweeps refuse then)
  sweep_waiter_actor sweep_waiter_;  ///< shares the lease again once the start sweep listed
  std::unique_ptr<local::embedded_control_plane> embedded_;
  std::unique_ptr<caf::actor_system_config> cfg_;
  std::unique_ptr<caf::actor_system> sys_;
  std::unique_ptr<runtime> rt_;
  policy::provider_info provider_;
  std::optional<shape_list> catalog_;
  std::string owner_;
  std::mt19937_64 rng_{std::random_device{}()};
};

/// The whole file (a program, a flow) as bytes, standard input for "-"; bad_request naming
/// it and the OS's reason (a directory: "Is a directory") if it cannot be read.
result<std::string> read_bytes(const std::string& path);

/// `$GUESTFLOW_STATE_DIR`, else `~/.local/state/guestflow`.
std::string state_dir(const cp::env_map& env);

/// The CLI's exit status for a run that ended with `code`: 130 when it was cancelled
/// (128 + SIGINT, as shells report an interrupted command), else 125 (as timeout(1) and
/// `docker run` use for their own failures).
int exit_status(ec code);

/// Prints "guestflow <what>: <code>: <message>" on stderr; returns exit_status(f.code).
int report_failure(const char* what, const failure& f);

/// A run's exit status once its output is known to be whole: `status` when nothing was
/// cut; else the cut is said on stderr and, unless the caller accepts cut output
/// (`--allow-truncated`), the run exits 125 — an incomplete output must not pass for a
/// successful run.
int status_after_cut(const char* what, const output_cut& cut, bool allowed, int status);

} // namespace guestflow::cli
