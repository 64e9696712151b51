#include "actors/runtime.hpp"

#include "actors/flow_spec.hpp"

#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

namespace guestflow {

runtime::runtime(caf::actor_system& sys, std::shared_ptr<cp::client> client,
                 runtime_options opts)
    : sys_(sys)
    , client_(std::move(client))
    , opts_(std::move(opts)) {
  opts_.reaper.owner = opts_.owner;
  cp_ = sys_.spawn(guestflow::controlplane, client_, opts_.timeouts);
  reaper_ = sys_.spawn(guestflow::reaper, cp_, opts_.reaper);
  lifecycle_ = sys_.spawn(guestflow::lifecycle, cp_, opts_.lifecycle);
  registry_ = sys_.spawn(guestflow::guest_registry, cp_, lifecycle_, opts_.registry);
  opts_.coordinator.owner = opts_.owner;
  opts_.coordinator.run.execution = opts_.execution;
  if (!gzip_bundle_for(client_->where())) opts_.coordinator.gzip_bundle = false;
  // One set of execution slots for every surface (flows here, sandbox and component runs
  // in the bridge, which reads it from options()).
  if (!opts_.coordinator.slots)
    opts_.coordinator.slots = std::make_shared<admission>(
        opts_.coordinator.settings.max_inflight, opts_.coordinator.settings.max_queued);
  coordinator_ = sys_.spawn(guestflow::coordinator, cp_, reaper_, opts_.coordinator);
}

runtime::~runtime() {
  stop();
}

execution_actor runtime::spawn_execution() const {
  return spawn_execution(opts_.execution);
}

execution_actor runtime::spawn_execution(execution_options opts) const {
  return sys_.spawn(execution, cp_, reaper_, std::move(opts));
}

execution_actor runtime::spawn_component(const component_plan& plan) const {
  auto opts = opts_.execution;
  if (plan.reusable) {
    opts.registry = registry_;
    opts.lifecycle = lifecycle_;
  }
  if (plan.collect) opts.collect = std::make_shared<const collect_options>(*plan.collect);
  return spawn_execution(std::move(opts));
}

void runtime::stop() {
  if (stopped_) return;
  stopped_ = true;
  caf::anon_send_exit(registry_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(lifecycle_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(coordinator_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(reaper_, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(cp_, caf::exit_reason::user_shutdown);
  if (client_) client_->shutdown();
}

} // namespace guestflow
