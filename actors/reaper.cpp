#include "actors/reaper.hpp"

#include "actors/guest_names.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <ctime>
#include <random>

namespace guestflow {
namespace {

using self_ptr = reaper_actor::stateful_pointer<reaper_state>;
using steady = std::chrono::steady_clock;

/// A tick after `delay`, unless one is already on its way by then.
void schedule_tick(self_ptr self, std::chrono::milliseconds delay) {
  auto& st = self->state;
  auto at = self->clock().now() + delay;
  if (st.tick_scheduled && st.tick_at <= at) return;
  st.tick_scheduled = true;
  st.tick_at = at;
  self->delayed_send(self, delay, tick_atom::value);
}

std::chrono::milliseconds backoff(const reaper_options& o, uint32_t attempts) {
  auto d = o.retry_initial * (uint64_t{1} << std::min<uint32_t>(attempts, 16));
  return std::min<std::chrono::milliseconds>(d, o.retry_max);
}

void answer_drains(self_ptr self) {
  auto& st = self->state;
  if (st.drains.empty() || !st.guests.empty() || st.sweeps_listing > 0) return;
  for (auto& rp : st.drains)
    rp.deliver(uint64_t{0});
  st.drains.clear();
}

/// Removes the `owned` index entry of a tracked name (if it has an owner).
void disown(reaper_state& st,
            std::unordered_map<std::string, reaper_state::entry>::iterator i) {
  auto& owner = i->second.owner;
  if (!owner) return;
  auto [first, last] = st.owned.equal_range(owner);
  for (auto j = first; j != last; ++j)
    if (j->second == &i->first) {
      st.owned.erase(j);
      break;
    }
  owner = caf::actor_addr{};
}

void forget(self_ptr self, const std::string& name, bool deleted) {
  auto& st = self->state;
  auto i = st.guests.find(name);
  if (i == st.guests.end()) return;
  if (i->second.owed && st.stats.pending > 0) --st.stats.pending;
  disown(st, i);
  st.guests.erase(i);
  st.stats.tracked = st.guests.size();
  if (deleted) ++st.stats.deleted;
  answer_drains(self);
}

void retry_later(self_ptr self, reaper_state::entry& e) {
  ++e.attempts;
  auto delay = backoff(self->state.opts, e.attempts);
  e.next_try = self->clock().now() + delay;
  schedule_tick(self, delay);
}

void delete_by_id(self_ptr self, const std::string& name) {
  auto& st = self->state;
  auto& e = st.guests[name];
  e.in_flight = true;
  self->request(st.cp, st.opts.call_timeout, delete_atom::value, e.id)
      .then([self, name](sandbox_deleted&) { forget(self, name, true); },
            [self, name](caf::error& err) {
              auto& st = self->state;
              if (to_failure(err).code == ec::not_found) return forget(self, name, true);
              ++st.stats.failed_deletes;
              auto i = st.guests.find(name);
              if (i == st.guests.end()) return;
              i->second.in_flight = false;
              retry_later(self, i->second);
            });
}

/// One list call resolves every owed name whose id is unknown.
void lookup_names(self_ptr self) {
  auto& st = self->state;
  if (st.lookup_in_flight) return;
  st.lookup_in_flight = true;
  self->request(st.cp, st.opts.call_timeout, list_atom::value, std::string{})
      .then(
          [self](sandbox_list& all) {
            auto& st = self->state;
            st.lookup_in_flight = false;
            std::unordered_map<std::string, std::string> live; // name → id
            for (auto& v : all.data)
              if (v.status != sandbox_status::destroyed &&
                  v.status != sandbox_status::destroying)
                live.emplace(v.name, v.id);
            std::vector<std::string> gone;
            auto now = self->clock().now();
            for (auto& [name, e] : st.guests) {
              if (!e.owed || !e.id.empty() || e.in_flight) continue;
              if (auto i = live.find(name); i != live.end()) {
                e.id = i->second;
                delete_by_id(self, name);
              } else if (e.look_once || now - e.tracked_at > st.opts.lost_create_watch ||
                         (e.create_over && !st.drains.empty())) {
                gone.push_back(name); // the create never materialized
              } else {
                retry_later(self, e); // a lost create may still appear
              }
            }
            for (auto& name : gone)
              forget(self, name, false);
          },
          [self](caf::error&) { // a failed list is not a failed delete: nothing is counted
            auto& st = self->state;
            st.lookup_in_flight = false;
            for (auto& [name, e] : st.guests)
              if (e.owed && e.id.empty()) retry_later(self, e);
          });
}

/// `look_once`: a refused create, looked up by name once rather than watched for a while.
void owe(self_ptr self, const std::string& name, bool look_once = false) {
  auto& st = self->state;
  auto i = st.guests.find(name);
  if (i == st.guests.end()) {
    // reap for a name never tracked (e.g. the owner's track raced its reap): take it on.
    i = st.guests.emplace(name, reaper_state::entry{}).first;
    i->second.tracked_at = self->clock().now();
    st.stats.tracked = st.guests.size();
  }
  auto& e = i->second;
  e.look_once = e.look_once || look_once;
  if (e.owed) return;
  e.owed = true;
  ++st.stats.pending;
  if (e.id.empty())
    lookup_names(self);
  else
    delete_by_id(self, name);
}

void sweep(self_ptr self, uint32_t older_than_s, caf::typed_response_promise<uint64_t> rp,
           uint32_t attempts = 0) {
  auto& st = self->state;
  ++st.sweeps_listing;
  self->request(st.cp, st.opts.call_timeout, list_atom::value, std::string{})
      .then(
          [self, older_than_s, rp](sandbox_list& all) mutable {
            auto& st = self->state;
            --st.sweeps_listing;
            auto now = static_cast<int64_t>(std::time(nullptr));
            uint64_t count = 0;
            for (auto& v : all.data) {
              auto parsed = names::parse(v.name);
              if (!parsed || parsed->owner != st.opts.owner ||
                  parsed->kind == names::guest_kind::component)
                continue; // another runtime's guest, or a reusable one: never ours to sweep
              if (v.status == sandbox_status::destroyed ||
                  v.status == sandbox_status::destroying)
                continue;
              if (st.guests.count(v.name)) continue; // a live execution owns it
              auto created = parse_rfc3339(v.created_at);
              if (!created || now - *created < static_cast<int64_t>(older_than_s)) continue;
              auto& e = st.guests[v.name];
              e.id = v.id;
              e.tracked_at = self->clock().now();
              st.stats.tracked = st.guests.size();
              owe(self, v.name);
              ++count;
            }
            rp.deliver(count);
            answer_drains(self);
          },
          [self, older_than_s, rp, attempts](caf::error& err) mutable {
            auto& st = self->state;
            --st.sweeps_listing;
            if (st.drains.empty() && attempts + 1 < st.opts.sweep_attempts) {
              auto delay = backoff(st.opts, attempts);
              st.sweeps_waiting.push_back({older_than_s, std::move(rp), attempts + 1,
                                           self->clock().now() + delay, std::move(err)});
              schedule_tick(self, delay);
              return;
            }
            rp.deliver(std::move(err));
            answer_drains(self);
          });
}

} // namespace

std::optional<int64_t> parse_rfc3339(const std::string& text) {
  std::tm tm{};
  auto end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  std::string rest = end;
  if (!rest.empty() && rest[0] == '.') {
    size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])))
      ++i;
    rest.erase(0, i);
  }
  if (rest != "Z" && rest != "+00:00" && !rest.empty()) return std::nullopt;
  return static_cast<int64_t>(timegm(&tm));
}

reaper_actor::behavior_type reaper(reaper_actor::stateful_pointer<reaper_state> self,
                                   controlplane_actor cp, reaper_options opts) {
  self->state.cp = std::move(cp);
  self->state.opts = std::move(opts);
  self->set_down_handler([self](caf::down_msg& dm) {
    // The owner died without releasing: everything it tracked is owed.
    std::vector<std::string> names;
    auto [first, last] = self->state.owned.equal_range(dm.source);
    for (auto j = first; j != last; ++j)
      names.push_back(*j->second);
    for (auto& name : names)
      owe(self, name);
  });
  return {
      [self](track_atom, std::string& name) {
        auto& st = self->state;
        auto i = st.guests.try_emplace(name).first;
        auto& e = i->second;
        e.tracked_at = self->clock().now();
        if (auto sender = self->current_sender()) {
          disown(st, i); // tracked again: the latest owner is the one that counts
          e.owner = caf::actor_cast<caf::actor_addr>(sender);
          st.owned.emplace(e.owner, &i->first);
          self->monitor(sender);
        }
        st.stats.tracked = st.guests.size();
      },
      [self](created_atom, std::string& name, std::string& id) {
        auto& st = self->state;
        ++st.stats.created;
        auto i = st.guests.find(name);
        if (i == st.guests.end()) return;
        i->second.id = id;
      },
      [self](released_atom, std::string& name) { forget(self, name, true); },
      [self](delete_atom, std::string& name) {
        auto i = self->state.guests.find(name);
        if (i != self->state.guests.end() && i->second.owner) i->second.owner_deleting = true;
      },
      [self](reap_atom, std::string& name) {
        owe(self, name);
        // Sent once the owner's call ended: a create (or a delete) that failed. Its answer, a
        // lookup's, comes later: marked in time.
        if (auto i = self->state.guests.find(name); i != self->state.guests.end())
          i->second.create_over = true;
      },
      [self](refused_atom, std::string& name) { owe(self, name, true); },
      [self](sweep_atom, uint32_t older_than_s) {
        auto rp = self->make_response_promise<caf::typed_response_promise<uint64_t>>();
        sweep(self, older_than_s, rp);
        return rp;
      },
      [self](drain_atom) {
        auto& st = self->state;
        auto rp = self->make_response_promise<caf::typed_response_promise<uint64_t>>();
        for (auto& w : st.sweeps_waiting) // shutting down: the next start sweeps again
          w.rp.deliver(std::move(w.last));
        st.sweeps_waiting.clear();
        if (st.guests.empty() && st.sweeps_listing == 0) {
          rp.deliver(uint64_t{0});
          return rp;
        }
        st.drains.push_back(rp);
        st.drain_deadline_at = self->clock().now() + st.opts.drain_deadline;
        std::vector<std::string> names;
        for (auto& kvp : st.guests)
          if (!kvp.second.owner_deleting || !kvp.second.owner) names.push_back(kvp.first);
        for (auto& name : names)
          owe(self, name);
        // A lost create already owed waits for its backoff (up to retry_max): look now.
        for (auto& kvp : st.guests)
          if (kvp.second.owed && kvp.second.id.empty() && !kvp.second.in_flight) {
            lookup_names(self);
            break;
          }
        self->delayed_send(self, st.opts.drain_deadline, tick_atom::value);
        return rp;
      },
      [self](stats_atom) { return self->state.stats; },
      [self](tick_atom) {
        auto& st = self->state;
        auto now = self->clock().now();
        if (now >= st.tick_at) // the earliest tick (a later, superseded one finds it cleared)
          st.tick_scheduled = false;
        bool need_lookup = false;
        std::vector<std::string> due;
        std::optional<steady::time_point> next; // the earliest retry not yet due
        for (auto& [name, e] : st.guests) {
          if (!e.owed || e.in_flight) continue;
          if (e.next_try > now) {
            if (!next || e.next_try < *next) next = e.next_try;
            continue;
          }
          if (e.id.empty())
            need_lookup = true;
          else
            due.push_back(name);
        }
        std::vector<reaper_state::waiting_sweep> sweeps_due;
        for (auto i = st.sweeps_waiting.begin(); i != st.sweeps_waiting.end();) {
          if (i->next_try <= now) {
            sweeps_due.push_back(std::move(*i));
            i = st.sweeps_waiting.erase(i);
            continue;
          }
          if (!next || i->next_try < *next) next = i->next_try;
          ++i;
        }
        if (next)
          schedule_tick(self, std::chrono::ceil<std::chrono::milliseconds>(*next - now));
        for (auto& w : sweeps_due)
          sweep(self, w.older_than_s, std::move(w.rp), w.attempts);
        for (auto& name : due)
          delete_by_id(self, name);
        if (need_lookup) lookup_names(self);
        // A drain past its deadline answers with what is still pending.
        if (!st.drains.empty() && now >= st.drain_deadline_at) {
          for (auto& rp : st.drains) // a sweep still listing may owe more: not drained
            rp.deliver(static_cast<uint64_t>(st.guests.size() + st.sweeps_listing));
          st.drains.clear();
        }
      },
  };
}

} // namespace guestflow
