// bench_round_trip_floor [--inflight K]... [--latency-ms N] [--rounds R] [--like-client]
//                        [--smoke]
//
// The floor under bench_runtime's CPU per execution: what 4 request/response round trips
// per run over a Unix socket cost a client that does nothing else. A forked echo server
// answers each request (a 200-byte "request") with 300 bytes after N ms, like
// `guestflow control-plane --simulate-latency-ms N`; the client is one thread with epoll,
// no actors, no HTTP, no JSON, K connections, each running runs of 4 round trips back to
// back (sustained, as bench_runtime's sustained load). Printed: the client thread's CPU per
// run over R·K runs after the first 2K, and its kernel share. Any runtime that makes 4
// calls per run to a control plane in another process pays at least this.
// --like-client: per call also the 2 system calls guestflow's client adds (the pooled
// connection's stale-check peek, Asio's epoll re-arm), to price them.
#include "bench/load_flags.hpp"
#include "common/fd_limit.hpp"
#include "tests/support/temp_dir.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <queue>
#include <stdexcept>
#include <string>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;
constexpr size_t request_bytes = 200;
constexpr size_t reply_bytes = 300;
constexpr int calls_per_run = 4;

[[noreturn]] void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

int listen_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(fd, 4096) != 0)
    die("echo server: listen");
  return fd;
}

/// The echo server: replies to each whole request after `latency`, in arrival order per
/// connection (one request in flight per connection, as the runtime's calls are).
[[noreturn]] void serve(int lfd, std::chrono::milliseconds latency) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{EPOLLIN, {}};
  ev.data.fd = lfd;
  ::epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  struct due {
    steady::time_point at;
    int fd;
    bool operator>(const due& o) const { return at > o.at; }
  };
  std::priority_queue<due, std::vector<due>, std::greater<due>> replies;
  std::vector<size_t> got(65536, 0);
  std::string reply(reply_bytes, 'r');
  char buf[4096];
  std::vector<epoll_event> events(1024);
  for (;;) {
    int timeout = -1;
    if (!replies.empty()) {
      auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(replies.top().at -
                                                                        steady::now());
      timeout = static_cast<int>(std::max<int64_t>(0, wait.count()));
    }
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), timeout);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == lfd) {
        while (int c = ::accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC)) {
          if (c < 0) break;
          epoll_event cev{EPOLLIN, {}};
          cev.data.fd = c;
          ::epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
        }
        continue;
      }
      for (;;) {
        auto r = ::read(fd, buf, sizeof buf);
        if (r == 0) ::_exit(0); // the client is done
        if (r < 0) break;
        got[fd] += static_cast<size_t>(r);
        while (got[fd] >= request_bytes) {
          got[fd] -= request_bytes;
          replies.push({steady::now() + latency, fd});
        }
      }
    }
    auto now = steady::now();
    while (!replies.empty() && replies.top().at <= now) {
      if (::write(replies.top().fd, reply.data(), reply.size()) !=
          static_cast<ssize_t>(reply.size()))
        die("echo server: write");
      replies.pop();
    }
  }
}

/// This thread's CPU in µs (precise), and in `sys_us` the kernel's part of the coarse
/// (tick-based) split, scaled to it.
double thread_cpu_us(double* sys_us) {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  auto us = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec);
  };
  *sys_us = us(ru.ru_stime);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

struct figures {
  double cpu_us_per_run, sys_share, runs_per_s;
};

double ticks_us() {
  rusage ru{};
  ::getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/// K connections, each running runs of 4 round trips back to back; measured over runs
/// [2K, (2+R)K).
figures drive(const std::string& path, size_t k, size_t rounds, bool like_client) {
  int ep = ::epoll_create1(EPOLL_CLOEXEC);
  std::vector<int> fds;
  std::vector<int> calls_left(k, calls_per_run);
  std::vector<size_t> got(k, 0);
  std::string request(request_bytes, 'q');
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
  for (size_t i = 0; i < k; ++i) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
      die("client: connect");
    epoll_event ev{EPOLLIN, {}};
    ev.data.u64 = i;
    ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    fds.push_back(fd);
  }
  for (auto fd : fds)
    if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()))
      die("client: write");
  size_t done = 0, from = 2 * k, to = (2 + rounds) * k;
  double cpu0 = 0, sys0 = 0, cpu1 = 0, sys1 = 0, ticks0 = 0, ticks1 = 0;
  steady::time_point t0, t1;
  char buf[4096];
  std::vector<epoll_event> events(1024);
  while (done < to) {
    int n = ::epoll_wait(ep, events.data(), static_cast<int>(events.size()), 10'000);
    if (n <= 0) throw std::runtime_error("no answer from the echo server for 10 s");
    for (int e = 0; e < n; ++e) {
      auto i = events[e].data.u64;
      auto r = ::read(fds[i], buf, sizeof buf);
      if (r <= 0) die("client: read");
      got[i] += static_cast<size_t>(r);
      if (got[i] < reply_bytes) continue;
      got[i] -= reply_bytes;
      if (--calls_left[i] == 0) {
        calls_left[i] = calls_per_run;
        if (++done == from) {
          cpu0 = thread_cpu_us(&sys0);
          ticks0 = ticks_us();
          t0 = steady::now();
        }
        if (done == to) {
          cpu1 = thread_cpu_us(&sys1);
          ticks1 = ticks_us();
          t1 = steady::now();
        }
      }
      if (like_client) {
        // What guestflow's client adds per call (strace): the pooled connection's stale
        // check, and Asio re-arming the edge for its readiness wait.
        char probe;
        ::recv(fds[i], &probe, 1, MSG_PEEK | MSG_DONTWAIT);
        epoll_event ev{EPOLLIN, {}};
        ev.data.u64 = i;
        ::epoll_ctl(ep, EPOLL_CTL_MOD, fds[i], &ev);
      }
      if (::write(fds[i], request.data(), request.size()) !=
          static_cast<ssize_t>(request.size()))
        die("client: write");
    }
  }
  for (auto fd : fds)
    ::close(fd);
  ::close(ep);
  auto runs = static_cast<double>(to - from);
  return {(cpu1 - cpu0) / runs, ticks1 > ticks0 ? (sys1 - sys0) / (ticks1 - ticks0) : 0,
          runs / std::chrono::duration<double>(t1 - t0).count()};
}

} // namespace

int main(int argc, char** argv) {
  auto fd_limit = guestflow::raise_fd_limit(); // a socket per connection, both ends
  guestflow::bench::load_flags flags{4};
  bool like_client = false;
  for (int i = 1; i < argc; ++i) {
    if (flags.take(i, argc, argv)) continue;
    if (std::string{argv[i]} == "--like-client") {
      like_client = true;
      continue;
    }
    std::fprintf(stderr, "usage: bench_round_trip_floor [--inflight K]... [--latency-ms N] "
                         "[--rounds R] [--like-client] [--smoke]\n");
    return 2;
  }
  auto inflight = flags.inflight;
  long latency_ms = flags.latency_ms;
  size_t rounds = flags.rounds;
  if (flags.smoke) {
    inflight = {20};
    latency_ms = 1;
    rounds = 1;
  }
  if (inflight.empty()) inflight = {1000, 10000};
  std::printf(
      "round-trip floor: %d request/response round trips per run over a Unix socket,\n"
      "a bare epoll client thread (no actors, no HTTP, no JSON) against a forked echo\n"
      "server answering after %ld ms; sustained, measured over runs [2K, %zuK); fd limit "
      "%s%s\n\n",
      calls_per_run, latency_ms, 2 + rounds, fd_limit.c_str(),
      like_client ? ";\nper call also the 2 system calls guestflow's client adds (stale-check "
                    "peek, epoll re-arm)"
                  : "");
  std::printf("%8s %10s %14s %8s\n", "inflight", "runs/s", "CPU us/run", "kernel");
  for (auto k : inflight) {
    guestflow::test_support::temp_dir dir{"gf-floor"};
    auto path = (dir.path() / "echo.sock").string();
    int lfd = listen_unix(path);
    std::fflush(stdout); // or the child would print it again
    pid_t server = ::fork();
    if (server < 0) die("fork");
    if (server == 0) serve(lfd, std::chrono::milliseconds{latency_ms});
    ::close(lfd);
    figures f{};
    try {
      f = drive(path, k, rounds, like_client);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_round_trip_floor: %s\n", e.what());
      ::kill(server, SIGKILL);
      return 1;
    }
    int status = 0;
    ::waitpid(server, &status, 0);
    std::printf("%8zu %10.0f %14.1f %7.0f%%\n", k, f.runs_per_s, f.cpu_us_per_run,
                100 * f.sys_share);
  }
  return 0;
}
