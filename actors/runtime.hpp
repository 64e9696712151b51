#pragma once

#include "actors/component_spec.hpp"
#include "actors/controlplane.hpp"
#include "actors/coordinator.hpp"
#include "actors/execution.hpp"
#include "actors/guest_registry.hpp"
#include "actors/lifecycle.hpp"
#include "actors/reaper.hpp"

#include <caf/actor_system.hpp>
#include <memory>
#include <string>

namespace guestflow {

struct runtime_options {
  std::string owner; ///< names::owner_id of this runtime
  controlplane_timeouts timeouts;
  reaper_options reaper;
  execution_options execution;
  lifecycle_options lifecycle;
  guest_registry_options registry;
  coordinator_options coordinator; ///< owner and execution options are filled in
};

/// The long-lived actors of one runtime, wired together: the control-plane actor around
/// one client, the reaper that guarantees deletion, and the reuse registry with the
/// lifecycle actor that resumes paused reusable guests, and the coordinator of whole-flow
/// runs. Surfaces (CLI, bridge) spawn one
/// execution per run from here. Non-blocking; shutdown is the caller's to sequence
/// (drain the reaper first, then stop()).
class runtime {
public:
  runtime(caf::actor_system& sys, std::shared_ptr<cp::client> client, runtime_options opts);
  ~runtime();

  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  caf::actor_system& system() const noexcept { return sys_; }
  const controlplane_actor& controlplane() const noexcept { return cp_; }
  const reaper_actor& reaper() const noexcept { return reaper_; }
  const coordinator_actor& coordinator() const noexcept { return coordinator_; }
  const lifecycle_actor& lifecycle() const noexcept { return lifecycle_; }
  const guest_registry_actor& registry() const noexcept { return registry_; }
  const runtime_options& options() const noexcept { return opts_; }
  const std::shared_ptr<cp::client>& client() const noexcept { return client_; }

  /// A fresh execution actor for one run (options default to the runtime's).
  execution_actor spawn_execution() const;
  execution_actor spawn_execution(execution_options opts) const;
  /// The execution for a component run: reusable plans go through the registry and the
  /// lifecycle actor, and `plan.collect` returns the artifacts.
  execution_actor spawn_component(const component_plan& plan) const;

  /// Stops the actors and the client's I/O. Idempotent.
  void stop();

private:
  caf::actor_system& sys_;
  std::shared_ptr<cp::client> client_;
  runtime_options opts_;
  controlplane_actor cp_;
  reaper_actor reaper_;
  lifecycle_actor lifecycle_;
  guest_registry_actor registry_;
  coordinator_actor coordinator_;
  bool stopped_ = false;
};

} // namespace guestflow
