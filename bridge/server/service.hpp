#pragma once

#include "actors/ask.hpp"
#include "actors/runtime.hpp"
#include "actors/sandbox_policy.hpp"
#include "messages/bridge.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"

#include <cstdint>
#include <functional>
#include <mutex>
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
};

/// Both counter sets /metrics reports, taken together.
struct runtime_stats {
  coordinator_stats runs;
  reaper_stats guests;
};

/// The bridge's domain side: turns decoded HTTP bodies into runs of the runtime's actors
/// without blocking: each call is one ask actor (actors/ask.hpp), and its answer arrives
/// through a `reply`. Thread-safe.
class service {
public:
  service(runtime& rt, service_config cfg);

  caf::actor_system& system() const noexcept { return rt_.system(); }
  const service_config& config() const noexcept { return cfg_; }
  /// "createos" or "local", as /v1/capabilities names the provider.
  std::string_view provider_name() const noexcept;

  /// Admits a whole-flow run with `relay` attached from seq 0; replies the run id.
  void start_run(run_request req, run_subscriber_actor relay, reply<std::string> done);
  /// Attaches `relay` to run `id` from `from_seq`; not_found for an unknown run.
  void subscribe(std::string id, uint64_t from_seq, run_subscriber_actor relay,
                 reply<uint64_t> done);
  /// Cancels run `id`; false if it had already ended.
  void cancel(std::string id, reply<bool> done);

  /// The sandbox-backend surface: `code` in a fresh guest, deleted afterwards.
  void sandbox_run(const sandbox_call& call, reply<sandbox_result> done);
  /// The component surface.
  void component_run(const component_call& call, reply<component_answer> done);

  /// The coordinator's and the reaper's counters.
  void stats(reply<runtime_stats> done);

private:
  /// The node's settings with the call's overrides.
  policy::sandbox_settings settings_for(std::optional<uint32_t> timeout,
                                        std::optional<uint64_t> memory_mb,
                                        std::optional<bool> allow_network) const;

  runtime& rt_;
  service_config cfg_;
  std::mutex rng_mu_; ///< guest names and upload paths are drawn from several threads
  std::mt19937_64 rng_{std::random_device{}()};
};

} // namespace guestflow::bridge
