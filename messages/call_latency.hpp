#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace guestflow {

/// A fixed-bucket histogram of control-plane call latencies (Prometheus `le` buckets),
/// lock-free so every completion can record into it from the client's I/O thread. Filled
/// by cp::observed(), rendered by the bridge's /metrics.
class call_latency {
public:
  /// Upper bounds in seconds; the last bucket is +Inf.
  static constexpr std::array<double, 12> bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                 0.1,   0.25,   0.5,   1,    2.5,   10};

  void record(std::chrono::nanoseconds took) noexcept {
    auto s = std::chrono::duration<double>(took).count();
    size_t i = 0;
    while (i < bounds.size() && s > bounds[i])
      ++i;
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<uint64_t>(took.count()), std::memory_order_relaxed);
  }

  /// Calls in bucket `i` alone (not cumulative); `i == bounds.size()` is +Inf.
  uint64_t count(size_t i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }
  double sum_seconds() const noexcept {
    return static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9;
  }

private:
  std::array<std::atomic<uint64_t>, bounds.size() + 1> counts_{};
  std::atomic<uint64_t> sum_ns_{0};
};

} // namespace guestflow
