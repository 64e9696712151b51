#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <thread>

namespace guestflow::cli {

/// SIGINT/SIGTERM turned into a callback on a thread of its own. Construct it first in
/// main, before any other thread exists: it blocks both signals for every thread created
/// afterwards, so only its sigwait() sees them.
class signal_watch {
public:
  signal_watch();
  ~signal_watch();

  /// What to do on the next signal (replaces the previous handler). A signal that came
  /// while no handler was set is kept and goes to the next handler set, at once: a SIGTERM
  /// during start-up (waiting for the state dir's lock, say) must still stop the run.
  void on_signal(std::function<void(int)> f);

  /// The last signal received, or 0.
  int received() const noexcept { return received_.load(); }

private:
  std::atomic<int> received_{0};
  std::function<void(int)> handler_;
  int unhandled_ = 0; ///< a signal no handler took yet
  std::mutex mu_;
  std::thread thread_;
};

} // namespace guestflow::cli
