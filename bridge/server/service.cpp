#include "bridge/server/service.hpp"

#include "actors/code_spec.hpp"
#include "actors/component_spec.hpp"
#include "actors/guest_names.hpp"
#include "actors/message_store.hpp"
#include "actors/session_recorder.hpp"
#include "controlplane/client/fleet_client.hpp"
#include "messages/type_ids.hpp"

#include <algorithm>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

namespace guestflow::bridge {

namespace {

using namespace std::chrono_literals;

/// Admission and subscription answer at once; a stalled coordinator is `unavailable`.
const caf::duration admin_timeout{30s};

/// The execution's time box plus room for create and delete, unless the node caps it.
caf::duration run_limit(uint32_t timeout_seconds, uint32_t cap_seconds) {
  std::chrono::seconds limit = std::chrono::seconds{timeout_seconds} + 10min;
  if (cap_seconds) limit = std::min(limit, std::chrono::seconds{cap_seconds});
  return caf::duration{limit};
}

/// The refusal of a run that finds every slot taken.
failure at_capacity(const admission& slots) {
  return fail(ec::capacity, "the runtime is at capacity: " + std::to_string(slots.inflight()) +
                                " of " + std::to_string(slots.max_inflight()) +
                                " runs in flight (GUESTFLOW_MAX_INFLIGHT); retry later");
}

} // namespace

service::service(runtime& rt, service_config cfg)
    : rt_(rt)
    , cfg_(std::move(cfg)) {
  live_->slots = rt.options().coordinator.slots;
  if (!live_->slots) // a runtime always makes one; a bare one here keeps the service total
    live_->slots =
        std::make_shared<admission>(rt.options().coordinator.settings.max_inflight, 0);
  live_->coordinator = rt.coordinator();
}

failure service::shutting_down() {
  return fail(ec::unavailable, "server shutting down: the run was cancelled and its guest "
                               "deleted; retry on another server or after the restart");
}

std::optional<failure> service::refusal_before_reading(bool may_queue) const {
  if (live_->stopping) return shutting_down();
  auto& slots = *live_->slots;
  if (!(may_queue ? slots.full_with_queue() : slots.full())) return std::nullopt;
  return at_capacity(*live_->slots);
}

result<std::string> service::take_slot(std::string_view surface) {
  if (live_->stopping) return shutting_down();
  auto id = std::string{surface} + "-" + std::to_string(live_->next++);
  if (!live_->slots->take(id)) return at_capacity(*live_->slots);
  return id;
}

void service::release_slot(const std::string& id) {
  live_->release(id);
}

std::function<void()> service::slot_releaser(std::string id) const {
  return [live = live_, id = std::move(id)] { live->release(id); };
}

void service::call_state::release(const std::string& id) {
  // A queued flow this lets in is the coordinator's to start.
  for (auto& started : slots->release(id))
    caf::anon_send(coordinator, run_atom::value, started);
}

template<class Answer>
run_cancel service::admit_call(std::string_view surface, execution_actor exec,
                               caf::duration limit, execution_spec spec,
                               std::function<Answer(execution_report&)> answer,
                               reply<Answer> done) {
  if (live_->stopping) return done(shutting_down()), run_cancel{};
  auto slot = std::string{surface} + "-" + std::to_string(live_->next++);
  // Every slot taken but one draining (its run answered, its guest being deleted): this
  // call waits the few milliseconds for it rather than being refused. The execution is
  // spawned already, so a cancel meanwhile is its own (it then creates nothing).
  auto go = [&sys = system(), live = live_, slot, exec, limit, spec = std::move(spec),
             answer = std::move(answer), done]() mutable {
    start_call<Answer>(sys, live, slot, exec, limit, std::move(spec), std::move(answer),
                       std::move(done));
  };
  auto waiting = std::make_shared<decltype(go)>(std::move(go));
  switch (live_->slots->take_or_wait(slot, [waiting] { (*waiting)(); })) {
  case admission::verdict::refused:
    caf::anon_send_exit(exec, caf::exit_reason::user_shutdown);
    return done(at_capacity(*live_->slots)), run_cancel{};
  case admission::verdict::start:
    (*waiting)();
    break;
  case admission::verdict::queued:
    break;
  }
  return [exec] { caf::anon_send(exec, cancel_atom::value); };
}

template<class Answer>
void service::start_call(caf::actor_system& sys, const std::shared_ptr<call_state>& live,
                         const std::string& slot, execution_actor exec, caf::duration limit,
                         execution_spec spec, std::function<Answer(execution_report&)> answer,
                         reply<Answer> done) {
  {
    std::lock_guard<std::mutex> guard{live->mu};
    live->calls.emplace(slot, exec);
  }
  // A shutdown that began before the call was tracked has not cancelled it.
  if (live->stopping) caf::anon_send(exec, cancel_atom::value);
  // The slot is the guest's until the execution is gone: it answers before it deletes the
  // guest (or hands it to the reaper), then ends, whatever path it takes.
  exec->attach_functor([live, slot] { live->release(slot); });
  // An answer at `limit` (transient) needs no cancel here: the asker ends with it, and the
  // execution, which watches its caller, stops (serve_limits_test's runs past the limit).
  ask_for<execution_report>(
      sys, exec, limit,
      reply<execution_report>{[live, slot, answer = std::move(answer),
                               done = std::move(done)](result<execution_report> r) {
        {
          std::lock_guard<std::mutex> guard{live->mu};
          live->calls.erase(slot);
        }
        live->slots->draining(slot);
        if (!r) return done(live->stopping ? shutting_down() : r.error());
        done(answer(*r));
      }},
      run_atom::value, std::move(spec));
}

void service::shutdown() {
  if (live_->stopping.exchange(true)) return;
  std::vector<execution_actor> live;
  {
    std::lock_guard<std::mutex> guard{live_->mu};
    for (auto& [slot, exec] : live_->calls)
      live.push_back(exec);
  }
  for (auto& exec : live)
    caf::anon_send(exec, cancel_atom::value);
  // Every flow run watches its coordinator: without it, each ends with `unavailable` and
  // its execution deletes the guest.
  caf::anon_send_exit(rt_.coordinator(), caf::exit_reason::user_shutdown);
}

size_t service::live_calls() const {
  std::lock_guard<std::mutex> guard{live_->mu};
  return live_->calls.size();
}

std::string_view service::provider_name() const noexcept {
  return cfg_.provider.kind == cp::provider::createos ? "createos" : "local";
}

void service::start_run(run_request req, run_subscriber_actor relay, reply<std::string> done) {
  if (live_->stopping) return done(shutting_down());
  auto cancel_on_disconnect = req.cancel_on_disconnect;
  if (!req.session_id || req.history || !cfg_.messages) {
    ask_for<std::string>(system(), rt_.coordinator(), admin_timeout, std::move(done),
                         run_atom::value, std::move(req), std::move(relay),
                         cancel_on_disconnect);
    return;
  }
  // The store's memory: its history first, then the recorder in front of the relay.
  if (auto refused = session_id_refusal(*req.session_id)) return done(*refused);
  auto& sys = system();
  auto store = cfg_.messages;
  auto admit = [&sys, store, coordinator = rt_.coordinator(), relay = std::move(relay),
                done](result<run_request> filled) mutable {
    if (!filled) return done(filled.error());
    auto cancel_on_disconnect = filled->cancel_on_disconnect;
    run_subscriber_actor recorder = sys.spawn(session_recorder, store, *filled->session_id,
                                              std::move(relay), cancel_on_disconnect);
    ask_for<std::string>(sys, coordinator, admin_timeout,
                         reply<std::string>{[recorder, done](result<std::string> id) {
                           // Refused: nothing will ever reach the recorder.
                           if (!id)
                             caf::anon_send_exit(recorder, caf::exit_reason::user_shutdown);
                           done(std::move(id));
                         }},
                         run_atom::value, std::move(*filled), recorder, cancel_on_disconnect);
  };
  ask_for<run_request>(sys, store, admin_timeout, reply<run_request>{std::move(admit)},
                       get_atom::value, std::move(req));
}

void service::subscribe(std::string id, uint64_t from_seq, run_subscriber_actor relay,
                        reply<uint64_t> done) {
  if (live_->stopping) return done(shutting_down());
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

run_cancel service::sandbox_run(const sandbox_call& call, reply<sandbox_result> done) {
  auto s = settings_for(call.timeout_seconds, call.memory_mb, call.allow_network);
  if (call.allowed_domains) s.allowed_domains = *call.allowed_domains;
  if (call.isolation) s.isolation = *call.isolation;
  auto spec = [&] {
    std::lock_guard<std::mutex> guard{rng_mu_};
    auto name = names::ephemeral(names::guest_kind::backend, cfg_.owner, rng_);
    return make_code_spec({call.code, call.env}, s, cfg_.provider, cfg_.catalog,
                          std::move(name), rng_);
  }();
  if (!spec) return done(spec.error()), run_cancel{};
  if (live_->slots->full()) return done(at_capacity(*live_->slots)), run_cancel{};
  auto limit = run_limit(spec->timeout_seconds, cfg_.run_limit_seconds);
  return admit_call<sandbox_result>(
      "sandbox", rt_.spawn_execution(), limit, std::move(*spec),
      [](execution_report& r) { return sandbox_result_of(r); }, std::move(done));
}

run_cancel service::component_run(const component_call& call, reply<component_answer> done) {
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
  if (!plan) return done(plan.error()), run_cancel{};
  if (live_->slots->full()) return done(at_capacity(*live_->slots)), run_cancel{};
  auto limit = run_limit(plan->spec.timeout_seconds, cfg_.run_limit_seconds);
  auto reusable = plan->reusable;
  return admit_call<component_answer>(
      "component", rt_.spawn_component(*plan), limit, std::move(plan->spec),
      [reusable](execution_report& r) {
        return component_answer{
            sandbox_result_of(r), r.outcome, r.name, reusable, r.reused, r.files};
      },
      std::move(done));
}

std::string service::fleet_metrics() const {
  if (!rt_.client()) return {};
  auto snapshot = cp::fleet_snapshot_of(*rt_.client());
  return snapshot ? cp::prometheus_text(*snapshot) : std::string{};
}

void service::endpoint_of(const std::string& id, reply<cp::endpoint> done) {
  if (!rt_.client()) return done(fail(ec::unavailable, "no control plane"));
  rt_.client()->endpoint_of(id, cp::millis{10'000}, std::move(done));
}

void service::guest_named(const std::string& name, reply<std::string> done) {
  ask_for<sandbox_list>(
      system(), rt_.controlplane(), caf::duration{std::chrono::seconds{30}},
      [name, done = std::move(done)](result<sandbox_list> r) {
        if (!r) return done(r.error());
        for (auto& g : r->data)
          if (g.name == name && g.status != sandbox_status::destroying &&
              g.status != sandbox_status::destroyed && g.status != sandbox_status::failed)
            return done(g.id);
        done(fail(ec::not_found, "no guest named " + name));
      },
      list_atom::value, std::string{});
}

void service::guest_view(const std::string& id, reply<sandbox_view> done) {
  ask_for<sandbox_view>(system(), rt_.controlplane(), caf::duration{std::chrono::seconds{30}},
                        std::move(done), get_atom::value, id);
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
