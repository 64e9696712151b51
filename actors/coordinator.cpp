#include "actors/coordinator.hpp"

#include "actors/flow_spec.hpp"
#include "actors/guest_names.hpp"
#include "actors/run_inputs.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

namespace guestflow {
namespace {

using self_ptr = coordinator_actor::stateful_pointer<coordinator_state>;

std::string fresh_run_id(self_ptr self) {
  static constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  auto& st = self->state;
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::string id;
  do {
    id = "run-";
    for (int i = 0; i < 16; ++i)
      id.push_back(alphabet[pick(st.rng)]);
  } while (st.runs.count(id) != 0);
  return id;
}

/// Starts a queued run that now holds a slot.
void start_admitted(self_ptr self, const std::string& id) {
  auto& st = self->state;
  auto i = st.runs.find(id);
  if (i != st.runs.end()) self->send(i->second, run_atom::value);
}

/// Frees `id`'s slot or queue place and starts whoever the queue lets in.
void release(self_ptr self, const std::string& id) {
  auto& st = self->state;
  for (auto& next : st.slots->release(id))
    start_admitted(self, next);
}

/// An ended run stays joinable for its retention period, unless the ended runs together
/// would hold more than the budget: then the oldest go now. At thousands of runs per second,
/// a minute of every run's events was gigabytes.
void retain(self_ptr self, const std::string& id, uint64_t bytes) {
  auto& st = self->state;
  st.retained.emplace(id, bytes);
  st.ended.push_back(id);
  st.retained_bytes += bytes;
  while (st.retained_bytes > st.opts.settings.retention_bytes && !st.ended.empty()) {
    auto oldest = std::move(st.ended.front());
    st.ended.pop_front();
    auto r = st.retained.find(oldest);
    if (r == st.retained.end()) continue; // gone already
    st.retained_bytes -= r->second;
    st.retained.erase(r);
    if (auto run = st.runs.find(oldest); run != st.runs.end())
      self->send(run->second, expire_atom::value);
  }
}

/// A run actor is gone: what it retained no longer counts.
void forget(self_ptr self, const std::string& id) {
  auto& st = self->state;
  if (auto r = st.retained.find(id); r != st.retained.end()) {
    st.retained_bytes -= r->second;
    st.retained.erase(r);
  }
  // Runs end and expire in about the same order: the ids of gone runs leave from the front.
  while (!st.ended.empty() && st.retained.count(st.ended.front()) == 0)
    st.ended.pop_front();
}

caf::result<std::string> admit(self_ptr self, run_request& req, run_subscriber_actor first,
                               bool cancel_on_disconnect) {
  auto& st = self->state;
  auto in = run_inputs::normalize(req.inputs, req.runtime_options);
  if (!in) return make_error(in.error().code, in.error().message);
  auto name = names::ephemeral(names::guest_kind::executor, st.opts.owner, st.rng);
  auto spec = make_flow_spec(req, *in, st.opts.settings, name, st.opts.assets, st.bundle_head);
  if (!spec) return make_error(spec.error().code, spec.error().message);
  auto id = fresh_run_id(self);
  auto verdict = st.slots->offer(id);
  if (verdict == admission::verdict::refused) {
    ++st.stats.refused;
    return make_error(ec::capacity,
                      "the runtime is at capacity: " + std::to_string(st.slots->inflight()) +
                          " runs executing (flows, sandbox and component runs) and " +
                          std::to_string(st.slots->queued()) +
                          " flows queued (GUESTFLOW_MAX_INFLIGHT / GUESTFLOW_MAX_QUEUED); "
                          "retry later");
  }
  ++st.stats.accepted;
  for (auto& key : in->ignored)
    spdlog::debug("flow run {}: runtime_options.{} ignored", id, key);
  flow_run_init init{id,
                     std::move(*spec),
                     st.opts.run,
                     std::move(first),
                     cancel_on_disconnect,
                     secret_scrubber{req.variables}};
  init.opts.slots = st.slots;
  auto run = self->spawn(flow_run, coordinator_actor{self}, st.cp, st.reaper, std::move(init));
  self->monitor(run);
  st.runs.emplace(id, run);
  st.ids.emplace(run.address(), id);
  spdlog::debug("flow run {} admitted as guest {} ({})", id, name,
                verdict == admission::verdict::start ? "starting" : "queued");
  if (verdict == admission::verdict::start) self->send(run, run_atom::value);
  return id;
}

} // namespace

coordinator_actor::behavior_type
coordinator(coordinator_actor::stateful_pointer<coordinator_state> self, controlplane_actor cp,
            reaper_actor reaper, coordinator_options opts) {
  auto& st = self->state;
  st.cp = std::move(cp);
  st.reaper = std::move(reaper);
  st.opts = std::move(opts);
  st.bundle_head = flow_bundle_head(st.opts.assets, st.opts.gzip_bundle);
  st.rng.seed(st.opts.seed != 0 ? st.opts.seed : std::random_device{}());
  st.slots = st.opts.slots ? st.opts.slots
                           : std::make_shared<admission>(st.opts.settings.max_inflight,
                                                         st.opts.settings.max_queued);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto i = st.ids.find(dm.source);
    if (i == st.ids.end()) return;
    auto id = std::move(i->second);
    st.ids.erase(i);
    st.runs.erase(id);
    forget(self, id);
    release(self, id); // a run actor that died without its `done`
  });
  return {
      [self](run_atom, run_request& req) -> caf::result<std::string> {
        return admit(self, req, {}, false);
      },
      [self](run_atom, run_request& req, run_subscriber_actor& first,
             bool cancel_on_disconnect) -> caf::result<std::string> {
        return admit(self, req, std::move(first), cancel_on_disconnect);
      },
      [self](subscribe_atom, const std::string& id, uint64_t from, run_subscriber_actor& sub,
             bool cancel_on_disconnect) -> caf::result<uint64_t> {
        auto i = self->state.runs.find(id);
        if (i == self->state.runs.end())
          return make_error(ec::not_found,
                            "no run " + id + " (unknown, or finished and expired)");
        return self->delegate(i->second, subscribe_atom::value, from, std::move(sub),
                              cancel_on_disconnect);
      },
      [self](cancel_atom, const std::string& id) -> caf::result<bool> {
        auto i = self->state.runs.find(id);
        if (i == self->state.runs.end())
          return make_error(ec::not_found,
                            "no run " + id + " (unknown, or finished and expired)");
        return self->delegate(i->second, cancel_atom::value);
      },
      [self](stats_atom) {
        auto& st = self->state;
        auto s = st.stats;
        s.inflight = st.slots->inflight();
        s.queued = st.slots->queued();
        s.runs = st.runs.size();
        return s;
      },
      [self](run_atom, const std::string& id) { start_admitted(self, id); },
      [self](done_atom, const std::string& id, uint64_t bytes) {
        if (self->state.runs.count(id) == 0) return;
        ++self->state.stats.finished;
        retain(self, id, bytes);
      },
      [self](released_atom, const std::string& id) { release(self, id); },
  };
}

} // namespace guestflow
