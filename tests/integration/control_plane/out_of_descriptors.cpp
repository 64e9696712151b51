#include "tests/integration/control_plane/out_of_descriptors.hpp"

#include "tests/support/slurp.hpp"

#include <chrono>
#include <filesystem>
#include <future>
#include <gtest/gtest.h>
#include <set>
#include <sstream>
#include <sys/resource.h>

namespace guestflow::testing {
namespace {

/// CPU time `pid` has used, in clock ticks (utime + stime of /proc/PID/stat).
uint64_t cpu_ticks(pid_t pid) {
  auto text = test_support::slurp("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream fields{text.substr(text.rfind(')') + 2)};
  std::string skip;
  for (int i = 3; i < 14; ++i) // state … cmajflt: fields 3 to 13
    fields >> skip;
  uint64_t utime = 0, stime = 0;
  fields >> utime >> stime;
  return utime + stime;
}

/// The lowest descriptor number `pid` has free: with its soft limit there, it can open none.
rlim_t lowest_free_descriptor(pid_t pid) {
  std::set<rlim_t> open;
  for (auto& e : std::filesystem::directory_iterator{std::filesystem::path{"/proc"} /
                                                     std::to_string(pid) / "fd"})
    open.insert(std::stoul(e.path().filename().string()));
  rlim_t n = 0;
  while (open.count(n))
    ++n;
  return n;
}

} // namespace

void expect_it_waits_to_accept_out_of_descriptors(pid_t pid, const http_client& client,
                                                  const std::string& target,
                                                  const header_map& headers) {
  rlimit saved{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &saved), 0);
  rlimit full = saved;
  full.rlim_cur = lowest_free_descriptor(pid);
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &full, nullptr), 0);
  struct restore {
    pid_t pid;
    rlimit limit;
    ~restore() { ::prlimit(pid, RLIMIT_NOFILE, &limit, nullptr); }
  } restore_at_exit{pid, saved};
  auto reply = std::async(std::launch::async, [client, target, headers] {
    return client.call("GET", target, {}, headers, std::chrono::seconds{20});
  });
  // The call waits in the accept queue. Accepting again at once after EMFILE would keep a
  // core busy (~50 ticks in this window); a server that pauses between tries uses next to
  // nothing.
  auto before = cpu_ticks(pid);
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds{500};
  while (std::chrono::steady_clock::now() < until)
    if (reply.wait_for(std::chrono::milliseconds{20}) == std::future_status::ready) {
      try {
        auto early = reply.get();
        FAIL() << "answered with no descriptor to accept it on: " << early.status << " "
               << early.body;
      } catch (const std::exception& e) {
        FAIL() << "failed with no descriptor to accept it on: " << e.what();
      }
    }
  auto used = cpu_ticks(pid) - before;
  EXPECT_LT(used, 10u) << "the server spun on accept";
  ::prlimit(pid, RLIMIT_NOFILE, &saved, nullptr);
  auto r = reply.get();
  EXPECT_EQ(r.status, 200u) << r.body;
}

} // namespace guestflow::testing
