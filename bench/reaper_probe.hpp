#pragma once

#include "actors/runtime.hpp"
#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>

/// What a bench asks the runtime's reaper: its counters, and whether every guest of a load
/// was deleted (a bench that stops before that would leave guests to the next one).
namespace guestflow::bench {

/// The reaper's counters now; throws when it does not answer within 30 s.
inline reaper_stats reaper_counters(caf::actor_system& sys, runtime& rt) {
  caf::scoped_actor self{sys};
  reaper_stats out;
  self->request(rt.reaper(), std::chrono::seconds{30}, stats_atom::value)
      .receive([&](reaper_stats& s) { out = s; },
               [&](caf::error& e) {
                 throw std::runtime_error("reaper stats: " + to_failure(e).message);
               });
  return out;
}

/// Polls (with the deadline) until the reaper tracks and owes nothing; returns the last
/// counters, settled or not.
inline reaper_stats settled_reaper(caf::actor_system& sys, runtime& rt,
                                   std::chrono::seconds within = std::chrono::seconds{60}) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  for (;;) {
    auto s = reaper_counters(sys, rt);
    if ((s.tracked == 0 && s.pending == 0) || std::chrono::steady_clock::now() > deadline)
      return s;
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
}

} // namespace guestflow::bench
