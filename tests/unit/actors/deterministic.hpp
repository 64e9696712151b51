#pragma once

// Drives CAF's deterministic scheduler from GoogleTest (CAF's own test DSL crashes under
// GoogleTest): every actor runs only inside run(), and time moves only by advance().

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <gtest/gtest.h>

namespace guestflow::test {

struct deterministic_config : caf::actor_system_config {
  deterministic_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.verbosity", caf::atom("quiet"));
    register_types(*this);
  }
};

class deterministic : public ::testing::Test {
protected:
  deterministic_config cfg;
  caf::actor_system sys{cfg};
  caf::scheduler::test_coordinator& sched =
      dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());

  /// Runs every enqueued job until nothing is left.
  void run() { sched.run(); }

  /// Moves the clock, fires what is due, and runs to quiescence.
  void advance(caf::timespan d) {
    sched.advance_time(d);
    run();
  }
};

} // namespace guestflow::test
