#include "bench/local/process_cpu.hpp"

#include "common/numbers.hpp"
#include "common/text.hpp"
#include "controlplane/local/guests/cgroups.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::bench {
namespace {

double ticks_to_s(unsigned long long ticks) {
  static const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  return static_cast<double>(ticks) / hz;
}

struct stat_fields {
  pid_t ppid = 0;
  proc_times times;
};

std::optional<stat_fields> read_stat(const std::string& path) {
  std::ifstream in{path};
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The comm (field 2) may hold spaces and parentheses: fields restart after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest{line.substr(close + 2)};
  std::string state, skip;
  stat_fields out;
  rest >> state >> out.ppid;
  for (int field = 5; field < 14; ++field)
    rest >> skip;
  unsigned long long utime = 0, stime = 0;
  long long cutime = 0, cstime = 0;
  if (!(rest >> utime >> stime >> cutime >> cstime)) return std::nullopt;
  out.times.self_s = ticks_to_s(utime + stime);
  out.times.children_s = ticks_to_s(static_cast<unsigned long long>(cutime + cstime));
  return out;
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in{path};
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double seconds(const timeval& t) {
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6;
}

} // namespace

std::optional<proc_times> read_proc_times(pid_t pid) {
  auto s = read_stat("/proc/" + std::to_string(pid) + "/stat");
  if (!s) return std::nullopt;
  return s->times;
}

double children_cpu_s(pid_t pid) {
  auto parent = read_proc_times(pid);
  double total = parent ? parent->children_s : 0;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator{"/proc", ec}) {
    auto name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto s = read_stat(e.path().string() + "/stat");
    if (s && s->ppid == pid) total += s->times.self_s + s->times.children_s;
  }
  return total;
}

std::optional<double> guest_cgroup_cpu_s(std::string* why_not) {
  auto layout = local::detect_cgroups();
  if (!layout) {
    if (why_not) *why_not = layout.error().message;
    return std::nullopt;
  }
  // The parent of every guest's directory, per hierarchy the guests join.
  for (auto dir : local::guest_cgroup_dirs(*layout, "")) {
    while (!dir.empty() && dir.back() == '/')
      dir.pop_back();
    if (layout->v2) {
      auto text = read_file(dir + "/cpu.stat");
      if (!text) break;
      std::istringstream in{*text};
      std::string key;
      unsigned long long value = 0;
      while (in >> key >> value)
        if (key == "usage_usec") return static_cast<double>(value) / 1e6;
      break;
    }
    if (auto text = read_file(dir + "/cpuacct.usage")) // ns
      if (auto ns = parse_uint(trim(*text))) return static_cast<double>(*ns) / 1e9;
  }
  if (why_not)
    *why_not = layout->v2 ? "no usage_usec in the guests' parent's cpu.stat (no guest yet?)"
                          : "cgroup v1 without cpuacct in a hierarchy the guests join (memory, "
                            "pids, freezer, cpu): no parent directory counts their CPU";
  return std::nullopt;
}

orphan_reaper::orphan_reaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    throw std::runtime_error(std::string{"PR_SET_CHILD_SUBREAPER: "} + std::strerror(errno));
}

void orphan_reaper::drain(const std::set<pid_t>& keep) {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (keep.count(info.si_pid)) return; // a control plane ended: its harness reports it
    int status = 0;
    rusage ru{};
    if (::wait4(info.si_pid, &status, 0, &ru) != info.si_pid) return;
    cpu_s_ += seconds(ru.ru_utime) + seconds(ru.ru_stime);
    ++count_;
  }
}

} // namespace guestflow::bench
