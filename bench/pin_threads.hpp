#pragma once

#include <cerrno>
#include <filesystem>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <sys/types.h>

namespace guestflow::bench {

/// Pins every thread of `pid` but `except` to one CPU (threads it starts later inherit the
/// pin from their creator). A lab instrument, not a setting: with the threads that hand
/// work to each other on one CPU, no hand-off needs a wake-up on another CPU (an
/// inter-processor interrupt, which a VM turns into an exit to the host), so the
/// difference against an unpinned run prices those wake-ups.
inline void pin_threads(pid_t pid, int cpu, pid_t except = 0) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  for (auto& e :
       std::filesystem::directory_iterator{"/proc/" + std::to_string(pid) + "/task"}) {
    auto tid = static_cast<pid_t>(std::stol(e.path().filename().string()));
    if (tid == except) continue;
    // A thread that ended meanwhile (ESRCH) needs no pin.
    if (sched_setaffinity(tid, sizeof set, &set) != 0 && errno != ESRCH)
      throw std::runtime_error("cannot pin thread " + std::to_string(tid) + " to CPU " +
                               std::to_string(cpu));
  }
}

} // namespace guestflow::bench
