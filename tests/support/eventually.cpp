#include "tests/support/eventually.hpp"

#include <thread>

namespace guestflow::test_support {

bool eventually(const std::function<bool()>& pred, std::chrono::milliseconds deadline,
                std::chrono::milliseconds interval) {
  auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= end) return pred();
    std::this_thread::sleep_for(interval); // the poll period; the deadline bounds the wait
  }
}

} // namespace guestflow::test_support
