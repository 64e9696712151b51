#include "controlplane/local/guests/host_command.hpp"

#include "common/unique_fd.hpp"
#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/spawn_helper.hpp"
#include "controlplane/local/guests/spawn_helper/protocol.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

extern char** environ;

namespace guestflow::local {
namespace {

using namespace spawn::command;

const char* step_name(int32_t s) {
  switch (s) {
  case step_setns:
    return "entering the network namespace";
  case step_sysctl:
    return "writing a sysctl in the network namespace";
  case step_fds:
    return "arranging file descriptors";
  default:
    return "exec";
  }
}

} // namespace

bool write_file(const std::string& path, const std::string& value) {
  unique_fd fd{::open(path.c_str(), O_WRONLY | O_CLOEXEC)};
  if (!fd) return false;
  return ::write(fd.get(), value.data(), value.size()) == ssize_t(value.size());
}

result<command_output> run_command(const std::vector<std::string>& argv,
                                   const command_options& opt) {
  if (argv.empty()) return fail(ec::unavailable, "run_command: empty argv");
  unique_fd in{::memfd_create("guestflow-stdin", MFD_CLOEXEC)};
  if (!in ||
      ::write(in.get(), opt.input.data(), opt.input.size()) != ssize_t(opt.input.size()) ||
      ::lseek(in.get(), 0, SEEK_SET) != 0)
    return fail(ec::unavailable, std::string{"memfd for stdin: "} + std::strerror(errno));
  int out[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
  unique_fd out_r{out[0]}, out_w{out[1]};
  if (::pipe2(status, O_CLOEXEC) != 0)
    return fail(ec::unavailable, std::string{"pipe: "} + std::strerror(errno));
  unique_fd status_r{status[0]}, status_w{status[1]};

  // The helper (spawn_helper.hpp) enters the netns, writes the sysctls and execs.
  std::vector<int> fds{in.get(), out_w.get(), out_w.get(), status_w.get()};
  if (opt.netns_fd >= 0) fds.push_back(opt.netns_fd);
  std::vector<std::string> args{"command", opt.netns_fd >= 0 ? "1" : "0",
                                std::to_string(opt.netns_sysctls.size())};
  for (const auto& [path, value] : opt.netns_sysctls)
    args.insert(args.end(), {path, value});
  args.insert(args.end(), argv.begin(), argv.end());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  auto spawned = spawn_helper(args, env, fds);
  if (!spawned) return spawned.error();
  const pid_t pid = *spawned;
  out_w.reset();
  status_w.reset();

  const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
  command_output res;
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out_r.get(), POLLIN, 0};
    int rc = ::poll(&p, 1, int(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    auto n = ::read(out_r.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (res.output.size() < 64 * 1024) res.output.append(buf, size_t(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  res.exit_code = child::exit_code_of(child::wait_for(pid));
  auto reports = child::collect(status_r.get(), std::chrono::steady_clock::now());
  if (timed_out)
    return fail(ec::unavailable, argv[0] + " did not finish within " +
                                     std::to_string(opt.timeout.count()) + " ms");
  if (reports && !reports->empty() && reports->front().step != 0)
    return fail(ec::unavailable, argv[0] + ": " + step_name(reports->front().step) + ": " +
                                     std::strerror(reports->front().error));
  return res;
}

} // namespace guestflow::local
