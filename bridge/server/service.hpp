#pragma once

#include "actors/ask.hpp"
#include "actors/runtime.hpp"
#include "actors/sandbox_policy.hpp"
#include "messages/bridge.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

namespace guestflow::bridge {

/// Called once with the answer, on an actor thread: the transport hops it to its own.
template<class T>
using reply = answer_callback<T>;

/// What the service needs to know besides the runtime, fixed at start-up.
struct service_config {
  policy::provider_info provider;
  shape_list catalog;                ///< fetched once at start-up
  policy::sandbox_settings defaults; ///< the node's LANGFLOW_SANDBOX_* settings
  uint64_t artifact_cap_bytes = uint64_t{5} << 20;
  std::string owner; ///< names::owner_id of the runtime (guest names)
  /// The state dir's message store (actors/message_store.hpp): the memory of runs with a
  /// `session_id` and no `history`; null = such runs keep no memory.
  message_store_actor messages;
  /// GUESTFLOW_RUN_LIMIT_SECONDS: the longest serve waits for a sandbox or component run's
  /// answer (then `transient`, and the run is cancelled); 0 = its timeout_seconds + 10 min.
  uint32_t run_limit_seconds = 0;
};

/// Stops a sandbox or component run: its guest is deleted and its reply is `cancelled`
/// (`unavailable` once the server is shutting down). Callable from any thread, any number
/// of times; empty when the run was refused before it started.
using run_cancel = std::function<void()>;

/// Both counter sets /metrics reports, taken together.
struct runtime_stats {
  coordinator_stats runs;
  reaper_stats guests;
};

/// The bridge's domain side: turns decoded HTTP bodies into runs of the runtime's actors
/// without blocking: each call is one ask (actors/ask.hpp), and its answer arrives
/// through a `reply`. Thread-safe.
class service {
public:
  service(runtime& rt, service_config cfg);

  caf::actor_system& system() const noexcept { return rt_.system(); }
  const service_config& config() const noexcept { return cfg_; }
  /// "createos" or "local", as /v1/capabilities names the provider.
  std::string_view provider_name() const noexcept;

  /// Admits a whole-flow run with `relay` attached from seq 0; replies the run id. A run
  /// with a `session_id` and no `history` gets the session's stored messages as its
  /// history first, and its `message` events are stored as they happen (whether or not
  /// the relay is still there).
  void start_run(run_request req, run_subscriber_actor relay, reply<std::string> done);
  /// Attaches `relay` to run `id` from `from_seq`; not_found for an unknown run.
  void subscribe(std::string id, uint64_t from_seq, run_subscriber_actor relay,
                 reply<uint64_t> done);
  /// Cancels run `id`; false if it had already ended.
  void cancel(std::string id, reply<bool> done);

  /// The sandbox-backend surface: `code` in a fresh guest, deleted afterwards. Takes an
  /// execution slot for its duration, or is refused with `capacity` at once.
  run_cancel sandbox_run(const sandbox_call& call, reply<sandbox_result> done);
  /// The component surface (a slot as sandbox_run).
  run_cancel component_run(const component_call& call, reply<component_answer> done);

  /// The `capacity` refusal a run would get now, if any (`may_queue`: a whole-flow run,
  /// which may wait in the queue): the transport asks before it reads such a request's
  /// body. Shutting down: `unavailable`.
  std::optional<failure> refusal_before_reading(bool may_queue) const;

  /// An execution slot for one unit of work that cannot wait (an agent session's command):
  /// its id, or `capacity` (`unavailable` while shutting down). Give it back with
  /// release_slot once the work has ended, whatever the outcome.
  result<std::string> take_slot(std::string_view surface);
  void release_slot(const std::string& id);
  /// release_slot(id) as a callable for a reply that may arrive after the service is gone.
  std::function<void()> slot_releaser(std::string id) const;

  /// Shutting down: new work is refused with `unavailable`, every sandbox and component
  /// run is cancelled (its reply becomes `unavailable`, "server shutting down") and the
  /// coordinator stops, which ends every flow run with `unavailable` and deletes its guest.
  void shutdown();
  /// Sandbox and component runs whose reply is still owed.
  size_t live_calls() const;

  /// The coordinator's and the reaper's counters.
  void stats(reply<runtime_stats> done);

  /// The control plane that holds guest `id` (its URL and key; on a fleet the node's):
  /// where a service URL is forwarded.
  void endpoint_of(const std::string& id, reply<cp::endpoint> done);

  /// The id of the live guest named `name` (a reusable component guest); not_found when
  /// no guest of the control plane (every node of a fleet) has that name.
  void guest_named(const std::string& name, reply<std::string> done);
  /// Guest `id` as its control plane describes it (`GET /v1/sandboxes/{id}`): on CreateOS,
  /// where its public URL is read (ports.cpp).
  void guest_view(const std::string& id, reply<sandbox_view> done);

  /// The per-node gauges of a fleet client in Prometheus text; empty with one control plane.
  std::string fleet_metrics() const;

private:
  /// The node's settings with the call's overrides.
  policy::sandbox_settings settings_for(std::optional<uint32_t> timeout,
                                        std::optional<uint64_t> memory_mb,
                                        std::optional<bool> allow_network) const;

  /// What a call's reply needs once it arrives (on an actor thread, possibly after the
  /// service is gone): shared with every callback.
  struct call_state;

  /// Runs `exec` in a slot of `surface`: now, or once a draining slot frees
  /// (admission::take_or_wait), or refused with `capacity` (`exec` then stopped).
  template<class Answer>
  run_cancel admit_call(std::string_view surface, execution_actor exec, caf::duration limit,
                        execution_spec spec, std::function<Answer(execution_report&)> answer,
                        reply<Answer> done);
  /// Runs `exec` as the call `slot` (taken): tracked for shutdown, `done` told once it
  /// answers, the slot draining from then and given back when `exec` is gone (after its
  /// guest's delete). Static: a waiting call starts on whichever thread frees its slot.
  template<class Answer>
  static void start_call(caf::actor_system& sys, const std::shared_ptr<call_state>& live,
                         const std::string& slot, execution_actor exec, caf::duration limit,
                         execution_spec spec, std::function<Answer(execution_report&)> answer,
                         reply<Answer> done);
  /// The failure a call gets while shutting down.
  static failure shutting_down();

  runtime& rt_;
  service_config cfg_;
  struct call_state {
    std::shared_ptr<admission> slots; ///< the runtime's, shared with the coordinator
    coordinator_actor coordinator;    ///< starts the queued flows a release lets in
    std::atomic<bool> stopping{false};
    std::atomic<uint64_t> next{0};
    mutable std::mutex mu;
    std::map<std::string, execution_actor> calls; ///< live sandbox/component runs by slot

    void release(const std::string& id);
  };
  std::shared_ptr<call_state> live_ = std::make_shared<call_state>();
  std::mutex rng_mu_; ///< guest names and upload paths are drawn from several threads
  std::mt19937_64 rng_{std::random_device{}()};
};

} // namespace guestflow::bridge
