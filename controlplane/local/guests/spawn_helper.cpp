#include "controlplane/local/guests/spawn_helper.hpp"

#include "controlplane/local/guests/child_setup.hpp"
#include "controlplane/local/guests/spawn_helper/protocol.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <optional>
#include <spawn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace guestflow::local {
namespace {

static_assert(sizeof(spawn::report) == sizeof(child::report),
              "the helper's status reports are read with child::collect");

/// The helper's memfd, made on first use and kept for the server's lifetime.
result<int> helper_fd() {
  static std::once_flag once;
  static std::optional<result<unique_fd>> fd;
  std::call_once(once,
                 [] { fd.emplace(sealed_memfd("guestflow-spawn", spawn_helper_image())); });
  if (!*fd) return fd->error();
  return (*fd)->get();
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  for (const auto& s : v)
    out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

failure spawn_error(const char* what, int err) {
  return fail(ec::unavailable,
              std::string{"starting the spawn helper: "} + what + ": " + std::strerror(err));
}

} // namespace

result<unique_fd> sealed_memfd(const char* name, std::string_view bytes) {
  unique_fd rw{::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)};
  if (!rw) return fail(ec::unavailable, std::string{"memfd_create: "} + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    auto n = ::write(rw.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(ec::unavailable, std::string{"memfd: "} + std::strerror(errno));
    done += size_t(n);
  }
  if (::fcntl(rw.get(), F_ADD_SEALS,
              F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    return fail(ec::unavailable, std::string{"sealing "} + name + ": " + std::strerror(errno));
  unique_fd ro{
      ::open(("/proc/self/fd/" + std::to_string(rw.get())).c_str(), O_RDONLY | O_CLOEXEC)};
  if (!ro)
    return fail(ec::unavailable,
                std::string{"reopening "} + name + ": " + std::strerror(errno));
  return ro;
}

result<pid_t> spawn_helper(const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::vector<int>& fds) {
  auto exe = helper_fd();
  if (!exe) return exe.error();
  // Every source, and the helper's own memfd (exec'd by path after the file actions), is
  // first lifted above the target range, so that no dup2 of the file actions clobbers a
  // descriptor that is still needed.
  const int n = int(fds.size());
  unique_fd program{::fcntl(*exe, F_DUPFD_CLOEXEC, n)};
  if (!program) return spawn_error("dup", errno);
  std::vector<unique_fd> lifted;
  for (int fd : fds) {
    lifted.emplace_back(::fcntl(fd, F_DUPFD_CLOEXEC, n));
    if (!lifted.back()) return spawn_error("dup", errno);
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  for (int i = 0; i < n; ++i)
    ::posix_spawn_file_actions_adddup2(&actions, lifted[size_t(i)].get(), i);
  // A server that ignores SIGPIPE or blocks signals in its threads must not hand that on.
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&attr, &all);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings{"guestflow-spawn"};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  auto argv = c_strings(argv_strings);
  auto envp = c_strings(env);
  const auto path = "/proc/self/fd/" + std::to_string(program.get());
  pid_t pid = 0;
  int err = ::posix_spawn(&pid, path.c_str(), &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (err != 0) return spawn_error("posix_spawn", err);
  return pid;
}

} // namespace guestflow::local
