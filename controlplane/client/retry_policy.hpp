#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>

namespace guestflow::cp {

/// Jittered exponential backoff inside a deadline, for idempotent calls that failed with
/// `transient`. Attempt n (0-based) waits a uniformly random time in [d/2, d] with
/// d = min(max, initial·2ⁿ): the jitter spreads retries of many callers, the lower half
/// keeps a floor so a retry storm cannot collapse to zero delay. A plain class.
class retry_policy {
public:
  using clock = std::chrono::steady_clock;
  using millis = std::chrono::milliseconds;

  retry_policy(millis initial, millis max, uint64_t seed = random_seed());

  /// A cheap per-thread random seed (std::random_device may open a file per use).
  static uint64_t random_seed();

  /// The wait before retry number `attempt` (0 = first retry), ignoring any deadline.
  millis delay(unsigned attempt);

  /// The wait before the next retry, or nullopt when that retry could not even start
  /// before `deadline`. A server's Retry-After (if any) raises the wait.
  std::optional<millis> next(clock::time_point now, clock::time_point deadline,
                             std::optional<millis> retry_after = std::nullopt);

  unsigned retries() const noexcept { return attempt_; }

private:
  /// splitmix64: 8 bytes of state. Every call in flight holds a retry_policy, and
  /// std::mt19937_64 (2.5 KB, seeded word by word) would dominate the call's own size.
  struct splitmix64 {
    using result_type = uint64_t;
    uint64_t state;
    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return ~uint64_t{0}; }
    result_type operator()() {
      uint64_t z = (state += 0x9e3779b97f4a7c15);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
      z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
      return z ^ (z >> 31);
    }
  };

  millis initial_;
  millis max_;
  splitmix64 rng_;
  unsigned attempt_ = 0;
};

} // namespace guestflow::cp
