#pragma once

#include "controlplane/client/connection.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace guestflow::cp {

/// Idle keep-alive connections of one endpoint. Thread-safe. A connection is only ever
/// in the pool or owned by exactly one call. Most recently used first, so surplus
/// connections age out instead of all being kept warm.
class connection_pool {
public:
  connection_pool(size_t max_idle, std::chrono::milliseconds idle_timeout,
                  std::chrono::milliseconds peek_after = std::chrono::milliseconds{0})
      : max_idle_(max_idle)
      , idle_timeout_(idle_timeout)
      , peek_after_(peek_after) {}

  /// An idle connection that still looks alive (peeked at once idle for `peek_after` or
  /// longer), or null (then the caller opens one).
  std::unique_ptr<connection> acquire();

  /// Keeps `c` for reuse unless the pool is full or closed (then closes it).
  void release(std::unique_ptr<connection> c);

  /// Closes every idle connection and refuses further releases (client shutdown).
  void close_all();

  size_t idle() const;

private:
  mutable std::mutex mtx_;
  std::vector<std::unique_ptr<connection>> idle_;
  size_t max_idle_;
  std::chrono::milliseconds idle_timeout_;
  std::chrono::milliseconds peek_after_;
  bool closed_ = false;
};

} // namespace guestflow::cp
