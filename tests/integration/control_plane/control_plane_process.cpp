#include "tests/integration/control_plane/control_plane_process.hpp"

#include "tests/support/eventually.hpp"
#include "tests/support/slurp.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <stdlib.h> // setenv
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::testing {

namespace {

using namespace std::chrono_literals;

using test_support::slurp;

/// fork + exec with stdout to a pipe (returned) and stderr to `err_file`.
pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
            int& stdout_read, const std::filesystem::path& err_file) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::dup2(out[1], 1);
    int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (err >= 0) ::dup2(err, 2);
    for (const auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    std::string bin = GUESTFLOW_BIN;
    // A private copy (a bench's A/B of two trees, or one safe from a relink mid-run).
    if (const char* copy = std::getenv("GUESTFLOW_TEST_BINARY"); copy && *copy) bin = copy;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(bin.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  stdout_read = out[0];
  return pid;
}

/// Waits for `pid` up to `timeout`; nullopt if it still runs.
std::optional<int> wait_for(pid_t pid, std::chrono::milliseconds timeout) {
  std::optional<int> status;
  test_support::eventually(
      [&] {
        int st = 0;
        auto r = ::waitpid(pid, &st, WNOHANG);
        if (r == pid)
          status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        else if (r < 0)
          status = -1;
        return status.has_value();
      },
      timeout, 10ms);
  return status;
}

/// Reads one line from `fd` before `deadline`; nullopt on EOF or timeout.
std::optional<std::string> read_line(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string line;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char c;
    auto n = ::read(fd, &c, 1);
    if (n <= 0) return std::nullopt;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

/// Everything `fd` gives until EOF (or `deadline`): a last line without '\n' included.
std::string read_rest(int fd, std::chrono::steady_clock::time_point deadline) {
  std::string out;
  char buf[4096];
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    auto n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

} // namespace

control_plane_process::control_plane_process(const std::filesystem::path& state_dir,
                                             const std::vector<std::string>& args,
                                             const std::map<std::string, std::string>& env) {
  std::vector<std::string> all{"control-plane", "--listen", "127.0.0.1:0", "--state-dir",
                               state_dir.string()};
  all.insert(all.end(), args.begin(), args.end());
  stderr_file_ = state_dir.string() + ".stderr";
  start(all, env);
}

control_plane_process::control_plane_process(const std::vector<std::string>& argv,
                                             const std::map<std::string, std::string>& env,
                                             std::filesystem::path stderr_file)
    : stderr_file_(std::move(stderr_file)) {
  start(argv, env);
}

void control_plane_process::start(const std::vector<std::string>& argv,
                                  const std::map<std::string, std::string>& env) {
  pid_ = spawn(argv, env, stdout_fd_, stderr_file_);
  auto line = read_line(stdout_fd_, std::chrono::steady_clock::now() + 60s);
  const std::string prefix = "listening on http://127.0.0.1:";
  if (!line || line->rfind(prefix, 0) != 0) {
    ::kill(pid_, SIGKILL);
    wait_for(pid_, 10s);
    pid_ = -1;
    throw std::runtime_error(argv.front() + " did not start (first line '" + line.value_or("") +
                             "'); stderr:\n" + stderr_text());
  }
  port_ = static_cast<uint16_t>(std::stoi(line->substr(prefix.size())));
}

control_plane_process::~control_plane_process() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    wait_for(pid_, 10s);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
  std::error_code ignored;
  std::filesystem::remove(stderr_file_, ignored);
}

int control_plane_process::stop(std::chrono::seconds timeout) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  auto st = wait_for(pid_, timeout);
  if (!st) {
    ::kill(pid_, SIGKILL);
    st = wait_for(pid_, 10s);
  }
  pid_ = -1;
  return st.value_or(-1);
}

std::string control_plane_process::stderr_text() const {
  return slurp(stderr_file_);
}

control_plane_process::outcome
control_plane_process::run_to_exit(const std::vector<std::string>& args,
                                   const std::map<std::string, std::string>& env,
                                   std::chrono::seconds timeout) {
  test_support::temp_dir tmp{"guestflow-cp-run"};
  auto err_file = tmp.path() / "stderr";
  int out_fd = -1;
  auto pid = spawn(args, env, out_fd, err_file);
  outcome o;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  o.stdout_text = read_rest(out_fd, deadline);
  ::close(out_fd);
  auto st = wait_for(pid, std::chrono::duration_cast<std::chrono::milliseconds>(
                              deadline - std::chrono::steady_clock::now() + 1s));
  if (!st) {
    ::kill(pid, SIGKILL);
    wait_for(pid, 10s);
  }
  o.status = st.value_or(-1);
  o.stderr_text = slurp(err_file);
  return o;
}

} // namespace guestflow::testing
