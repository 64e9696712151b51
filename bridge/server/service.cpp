#include "bridge/server/service.hpp"

#include "actors/code_spec.hpp"
#include "actors/component_spec.hpp"
#include "actors/guest_names.hpp"
#include "messages/type_ids.hpp"

namespace guestflow::bridge {

namespace {

using namespace std::chrono_literals;

/// Admission and subscription answer at once; a stalled coordinator is `unavailable`.
const caf::duration admin_timeout{30s};

/// The execution's time box plus room for create and delete.
caf::duration run_limit(uint32_t timeout_seconds) {
  return caf::duration{std::chrono::seconds{timeout_seconds} + 10min};
}

sandbox_result result_of(const execution_report& r) {
  return {r.result.stdout_text, r.result.stderr_text, r.result.exit_code, r.result.exec_ms};
}

} // namespace

service::service(runtime& rt, service_config cfg)
    : rt_(rt)
    , cfg_(std::move(cfg)) {}

std::string_view service::provider_name() const noexcept {
  return cfg_.provider.kind == cp::provider::createos ? "createos" : "local";
}

void service::start_run(run_request req, run_subscriber_actor relay, reply<std::string> done) {
  auto cancel_on_disconnect = req.cancel_on_disconnect;
  ask_for<std::string>(system(), rt_.coordinator(), admin_timeout, std::move(done),
                       run_atom::value, std::move(req), std::move(relay), cancel_on_disconnect);
}

void service::subscribe(std::string id, uint64_t from_seq, run_subscriber_actor relay,
                        reply<uint64_t> done) {
  ask_for<uint64_t>(system(), rt_.coordinator(), admin_timeout, std::move(done),
                    subscribe_atom::value, std::move(id), from_seq, std::move(relay), false);
}

void service::cancel(std::string id, reply<bool> done) {
  ask_for<bool>(system(), rt_.coordinator(), admin_timeout, std::move(done), cancel_atom::value,
                std::move(id));
}

policy::sandbox_settings service::settings_for(std::optional<uint32_t> timeout,
                                               std::optional<uint64_t> memory_mb,
                                               std::optional<bool> allow_network) const {
  auto s = cfg_.defaults;
  s.timeout_seconds = timeout.value_or(s.timeout_seconds);
  s.memory_mb = memory_mb.value_or(s.memory_mb);
  s.allow_network = allow_network.value_or(s.allow_network);
  return s;
}

void service::sandbox_run(const sandbox_call& call, reply<sandbox_result> done) {
  auto s = settings_for(call.timeout_seconds, call.memory_mb, call.allow_network);
  if (call.allowed_domains) s.allowed_domains = *call.allowed_domains;
  auto spec = [&] {
    std::lock_guard<std::mutex> guard{rng_mu_};
    auto name = names::ephemeral(names::guest_kind::backend, cfg_.owner, rng_);
    return make_code_spec({call.code, call.env}, s, cfg_.provider, cfg_.catalog,
                          std::move(name), rng_);
  }();
  if (!spec) return done(spec.error());
  auto limit = run_limit(spec->timeout_seconds);
  ask_for<execution_report>(
      system(), rt_.spawn_execution(), limit,
      reply<execution_report>{[done = std::move(done)](result<execution_report> r) {
        if (!r) return done(r.error());
        done(result_of(*r));
      }},
      run_atom::value, std::move(*spec));
}

void service::component_run(const component_call& call, reply<component_answer> done) {
  auto s = settings_for(call.timeout_seconds, call.memory_mb, call.allow_network);
  component_request req;
  req.flow_id = call.flow_id;
  req.component_id = call.component_id;
  req.reuse = call.reuse ? reuse_mode::flow : reuse_mode::none;
  req.python = call.program;
  req.argv = call.argv;
  req.return_files = call.return_files;
  auto plan = [&] {
    std::lock_guard<std::mutex> guard{rng_mu_};
    return make_component_spec(req, s, cfg_.provider, cfg_.catalog, cfg_.owner,
                               cfg_.artifact_cap_bytes, rng_);
  }();
  if (!plan) return done(plan.error());
  auto limit = run_limit(plan->spec.timeout_seconds);
  auto reusable = plan->reusable;
  ask_for<execution_report>(
      system(), rt_.spawn_component(*plan), limit,
      reply<execution_report>{[done = std::move(done), reusable](result<execution_report> r) {
        if (!r) return done(r.error());
        done(component_answer{result_of(*r), r->outcome, r->name, reusable, r->reused,
                              r->files});
      }},
      run_atom::value, std::move(plan->spec));
}

void service::stats(reply<runtime_stats> done) {
  // Two asks, joined: the reaper's answer completes what the coordinator's began.
  auto& sys = system();
  auto reaper = rt_.reaper();
  ask_for<coordinator_stats>(
      sys, rt_.coordinator(), admin_timeout,
      reply<coordinator_stats>{[&sys, reaper,
                                done = std::move(done)](result<coordinator_stats> c) {
        if (!c) return done(c.error());
        ask_for<reaper_stats>(sys, reaper, admin_timeout,
                              reply<reaper_stats>{[runs = *c, done](result<reaper_stats> g) {
                                if (!g) return done(g.error());
                                done(runtime_stats{runs, *g});
                              }},
                              stats_atom::value);
      }},
      stats_atom::value);
}

} // namespace guestflow::bridge
