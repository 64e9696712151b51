#pragma once

#include "bridge/server/routes.hpp"
#include "bridge/server/service.hpp"
#include "messages/call_latency.hpp"
#include "messages/run.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace guestflow::bridge {

/// The bridge's own counters; /metrics renders them with the runtime's (Prometheus text).
class metrics {
public:
  /// One answered request (status class counted per endpoint).
  void answered(endpoint ep, unsigned status) noexcept;
  /// A run's terminal event reached its caller.
  void finished(const run_event& terminal) noexcept;
  /// Event lines handed to clients.
  void sent(uint64_t events) noexcept { events_.fetch_add(events, std::memory_order_relaxed); }
  /// A streamed client fell too far behind or stopped reading and was dropped.
  void dropped_slow_client() noexcept { slow_.fetch_add(1, std::memory_order_relaxed); }
  /// Open streamed responses (+1 at start, -1 at end).
  void streams(int delta) noexcept {
    open_streams_.fetch_add(delta, std::memory_order_relaxed);
  }

  /// The exposition; `cp` may be null when the client is not observed.
  std::string render(const runtime_stats& rt, const call_latency* cp);

private:
  static constexpr size_t status_classes = 3; ///< 2xx, 4xx, 5xx
  static constexpr size_t endpoints = endpoint_count;
  static constexpr size_t outcomes = 1 + static_cast<size_t>(last_ec); ///< complete + every ec

  std::array<std::atomic<uint64_t>, endpoints * status_classes> requests_{};
  std::array<std::atomic<uint64_t>, outcomes> outcomes_{};
  std::atomic<uint64_t> events_{0};
  std::atomic<uint64_t> slow_{0};
  std::atomic<int64_t> open_streams_{0};

  std::mutex rate_mu_; ///< events/s over the interval since the previous scrape
  std::chrono::steady_clock::time_point last_scrape_ = std::chrono::steady_clock::now();
  uint64_t last_events_ = 0;
};

} // namespace guestflow::bridge
