#pragma once

// The tests' one way to wait for something outside the test's control (a process exiting,
// a file appearing): poll with a deadline, never sleep a fixed time and hope.

#include <chrono>
#include <functional>

namespace guestflow::test_support {

/// Checks `pred` every `interval` until it holds or `deadline` has passed; returns its last
/// value, so a condition that comes true right at the deadline still counts. `interval` is
/// the poll period, not a guess at how long anything takes.
bool eventually(const std::function<bool()>& pred,
                std::chrono::milliseconds deadline = std::chrono::seconds{15},
                std::chrono::milliseconds interval = std::chrono::milliseconds{10});

} // namespace guestflow::test_support
