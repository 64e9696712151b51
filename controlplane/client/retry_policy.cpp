#include "controlplane/client/retry_policy.hpp"

#include <algorithm>

namespace guestflow::cp {

retry_policy::retry_policy(millis initial, millis max, uint64_t seed)
    : initial_(std::max(initial, millis{1}))
    , max_(std::max(max, initial_))
    , rng_{seed} {}

uint64_t retry_policy::random_seed() {
  thread_local std::mt19937_64 seeds{std::random_device{}()};
  return seeds();
}

retry_policy::millis retry_policy::delay(unsigned attempt) {
  auto d = initial_.count();
  for (unsigned i = 0; i < attempt && d < max_.count(); ++i)
    d *= 2;
  d = std::min<int64_t>(d, max_.count());
  // The lower half of the jitter never reaches 0: every retry waits at least 1 ms.
  std::uniform_int_distribution<int64_t> jitter(std::max<int64_t>(d / 2, 1), d);
  return millis{jitter(rng_)};
}

std::optional<retry_policy::millis> retry_policy::next(clock::time_point now,
                                                       clock::time_point deadline,
                                                       std::optional<millis> retry_after) {
  auto wait = delay(attempt_);
  if (retry_after) wait = std::max(wait, *retry_after);
  if (now + wait >= deadline) return std::nullopt;
  ++attempt_;
  return wait;
}

} // namespace guestflow::cp
