#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

namespace guestflow::bench {

/// One thread group's CPU so far.
struct thread_cpu {
  uint64_t ns = 0;         ///< schedstat: precise
  uint64_t user_ticks = 0; ///< stat utime/stime: coarse, for the kernel share only
  uint64_t sys_ticks = 0;
};

/// CPU per thread group (from /proc/self/task/*): where the process's CPU goes. Groups:
/// the main thread (the harness's waiting loop), CAF's scheduler workers, CAF's clock,
/// CAF's other threads, and the rest (the client's I/O thread and its resolver).
inline std::map<std::string, thread_cpu> thread_cpu_by_group() {
  std::map<std::string, thread_cpu> out;
  auto self = std::to_string(::getpid());
  for (auto& e : std::filesystem::directory_iterator{"/proc/self/task"}) {
    auto tid = e.path().filename().string();
    std::ifstream comm_in{e.path() / "comm"}, sched_in{e.path() / "schedstat"},
        stat_in{e.path() / "stat"};
    std::string comm, stat;
    uint64_t ns = 0;
    if (!std::getline(comm_in, comm) || !(sched_in >> ns) || !std::getline(stat_in, stat))
      continue; // the thread ended meanwhile
    // utime and stime are fields 14 and 15; the comm (field 2) may contain spaces.
    std::istringstream fields{stat.substr(stat.rfind(')') + 2)};
    std::string skip;
    for (int i = 3; i < 14; ++i)
      fields >> skip;
    uint64_t utime = 0, stime = 0;
    fields >> utime >> stime;
    std::string group = tid == self                       ? "main"
                        : comm.rfind("caf.multi", 0) == 0 ? "caf-workers"
                        : comm == "caf.clock"             ? "clock"
                        : comm.rfind("caf.", 0) == 0      ? "caf-other"
                                                          : "client-io";
    auto& g = out[group];
    g.ns += ns;
    g.user_ticks += utime;
    g.sys_ticks += stime;
  }
  return out;
}

} // namespace guestflow::bench
