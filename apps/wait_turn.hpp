#pragma once

#include "messages/error.hpp"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

namespace guestflow::cli {

/// Tries `attempt` until it has an answer: it returns nullopt while another process holds
/// what it needs (the state dir, the owner's lease), and is tried again after 20 ms,
/// doubling to 0.5 s. `stop_waiting`, asked between tries, ends the wait with `stopped`.
template<class T>
result<T> wait_turn(const std::function<std::optional<result<T>>()>& attempt,
                    const std::function<bool()>& stop_waiting, const failure& stopped) {
  auto pause = std::chrono::milliseconds{20};
  for (;;) {
    if (auto answer = attempt()) return std::move(*answer);
    if (stop_waiting()) return stopped;
    std::this_thread::sleep_for(pause); // another process's turn: polled, not signalled
    pause = std::min(pause * 2, std::chrono::milliseconds{500});
  }
}

} // namespace guestflow::cli
