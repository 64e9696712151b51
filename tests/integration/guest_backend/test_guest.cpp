#include "tests/integration/guest_backend/test_guest.hpp"

#include "tests/support/proc.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <random>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local::test {

std::string unique_token(const std::string& prefix) {
  static std::atomic<int> counter{0};
  static const auto salt = std::random_device{}() % 100000;
  return prefix + std::to_string(::getpid()) + "-" + std::to_string(salt) + "-" +
         std::to_string(counter++);
}

guest_spec make_spec(uint64_t mem_mib, egress_policy egress) {
  guest_spec s;
  s.id = unique_token("t");
  s.name = "g" + std::to_string(::getpid() % 100000);
  s.shape_info = shape{"s-test", 1, mem_mib, 1024};
  s.rootfs = "debian:12";
  s.egress = std::move(egress);
  return s;
}

bool read_for(int fd, std::string& into, std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  char buf[4096];
  for (;;) {
    auto n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      into.append(buf, size_t(n));
      continue;
    }
    if (n == 0) return false;
    if (errno != EAGAIN && errno != EINTR) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    ::poll(&p, 1, int(left.count()));
  }
}

run_result run(guest_backend& b, const guest_runtime& g, const std::vector<std::string>& argv,
               const std::map<std::string, std::string>& envs,
               std::chrono::milliseconds timeout) {
  run_result r;
  exec_request req;
  req.cmd = argv.at(0);
  req.args.assign(argv.begin() + 1, argv.end());
  auto p = b.start_exec(g, req, envs);
  if (!p) {
    r.err = "start_exec failed: " + p.error().message;
    return r;
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  bool out_open = true, err_open = true, exited = false;
  while (out_open || err_open || !exited) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      b.kill_exec(*p);
      break;
    }
    pollfd fds[3] = {{out_open ? p->stdout_fd : -1, POLLIN, 0},
                     {err_open ? p->stderr_fd : -1, POLLIN, 0},
                     {exited ? -1 : p->pidfd, POLLIN, 0}};
    ::poll(fds, 3, int(left.count()));
    if (fds[0].revents) out_open = read_for(p->stdout_fd, r.out, 0ms);
    if (fds[1].revents) err_open = read_for(p->stderr_fd, r.err, 0ms);
    if (fds[2].revents) exited = true;
  }
  r.exit_code = b.reap(*p);
  return r;
}

std::vector<pid_t> pids_with_marker(const std::string& marker) {
  return test_support::pids_where("cmdline", [&marker](const std::string& cmd) {
    return cmd.find(marker) != std::string::npos;
  });
}

struct tcp_server::state {
  int fd = -1;
  uint16_t port = 0;
  std::string greeting;
  std::atomic<bool> stop{false};
  std::atomic<int> accepted{0};
  std::thread thread;
};

tcp_server::tcp_server(int fd, std::string greeting)
    : s_(std::make_shared<state>()) {
  s_->fd = fd;
  s_->greeting = std::move(greeting) + "\n";
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  s_->port = ntohs(a.sin_port);
  s_->thread = std::thread([s = s_] {
    while (!s->stop) {
      pollfd p{s->fd, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(s->fd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      ++s->accepted;
      [[maybe_unused]] auto n = ::write(c, s->greeting.data(), s->greeting.size());
      ::close(c);
    }
  });
}

tcp_server::~tcp_server() {
  s_->stop = true;
  s_->thread.join();
  ::close(s_->fd);
}

uint16_t tcp_server::port() const {
  return s_->port;
}

int tcp_server::accepted() const {
  return s_->accepted;
}

std::unique_ptr<tcp_server> tcp_server::on(const std::string& address, std::string greeting) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address.c_str(), &a.sin_addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 16) != 0) {
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  return std::make_unique<tcp_server>(fd, std::move(greeting));
}

std::string probe(guest_backend& b, const guest_runtime& g, const std::string& host,
                  uint16_t port) {
  static const char* code = R"(import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("OK", s.recv(100).decode().strip())
except Exception as e:
    print("FAIL", type(e).__name__, getattr(e, "errno", None))
)";
  auto r = run(b, g, {"python3", "-c", code, host, std::to_string(port)});
  if (r.exit_code != 0) return "ERROR exit " + std::to_string(r.exit_code) + ": " + r.err;
  while (!r.out.empty() && r.out.back() == '\n')
    r.out.pop_back();
  return r.out;
}

} // namespace guestflow::local::test
