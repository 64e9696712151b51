// A guest's service URL against a direct connection inside the guest's own network
// namespace and against a peer relay, in one run, on a real control plane and a real
// deny-all guest:
//
//   latency: sequential GETs on one keep-alive connection per side, interleaved in rounds:
//   direct (a socket made in the guest's netns by this process → the guest's server),
//   peer (client → a minimal relay, a child process: one epoll loop copying bytes between the
//   client's connection and a socket it made in the guest's netns, no HTTP parsing, no
//   authorization) and proxied (client → control plane → a socket made in the guest's netns
//   → the guest's server);
//   throughput: C clients each on its own keep-alive connection for T seconds, each side.
//
// A relayed request makes two loopback round trips where the direct one makes one: no relay
// reaches 1.5x direct on an app that answers in a few tens of microseconds. The peer is that
// floor, measured in the same run; the proxy is judged against both.
//
// Two apps in the guest, each measured all three ways with its own ratios: a small asyncio
// HTTP/1.1 echo (keep-alive, a fixed 2-byte body: the fixed cost of the path, not an app) and
// the issue's own example app, `python3 -m http.server --protocol HTTP/1.1` (keep-alive)
// serving a 1 KiB file, whose ~44 ms p50 (header and body in two writes, Nagle + delayed ACK)
// hides the path; and that app without the stall (the same handler with
// disable_nagle_algorithm = True): a small real Python web app's cost per request. Targets:
// issue 40's, proxied p50 <= 1.5x direct and requests/s >= 0.5x direct (also reported for the
// peer); ours, proxied p50 <= 1.5x the peer's and requests/s >= 0.67x the peer's (the proxy's
// HTTP work and authorization may cost at most half again a byte relay's). Needs root (guests;
// entering the guest's netns).
// Each relaying side's CPU (all its threads, schedstat) over the latency requests is reported
// per request.
//   bench_ingress [--quick] [--echo-only] [--apps 1,2,3] [--peers epoll,spin:US,cpu:N,sockmap]
//                 [--client-cpu N] [--cp-cpu N] [--requests N] [--clients C] [--seconds T]
//                 [--out FILE]
// --echo-only (--apps 1) skips both http.servers: for profiling the path. --peers adds peer
// variants, each its own side with its ratios to direct (where a hop's time goes, issue 40's
// "blocked" question): spin:US polls its epoll set US microseconds before blocking, cpu:N
// runs it on CPU N, sockmap splices the response direction in the kernel (a BPF sockmap
// sk_skb redirect). --client-cpu pins the bench's client threads, --cp-cpu every thread of
// the control plane (placement experiments; `taskset -c 0 bench_ingress` puts everything on
// one CPU).
// Without --out (and without --quick) the report goes to bench/results/
// <date>-<host>-<commit>-ingress.txt (never overwritten: -2, -3… when taken).
#include "common/text.hpp"
#include "controlplane/local/network/netns_socket.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <linux/bpf.h>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

using namespace guestflow;
using namespace guestflow::testing;
using clock_type = std::chrono::steady_clock;
namespace fs = std::filesystem;

const char* const guest_server = R"py(
import asyncio, sys
class P(asyncio.Protocol):
    def connection_made(self, t): self.t, self.buf = t, b""
    def data_received(self, d):
        self.buf += d
        while b"\r\n\r\n" in self.buf:
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            close = b"connection: close" in head.lower()
            self.t.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" +
                         (b"Connection: close\r\n" if close else b"") + b"\r\nok")
            if close: self.t.close(); return
async def main():
    s = await asyncio.get_running_loop().create_server(P, "127.0.0.1", int(sys.argv[1]))
    await s.serve_forever()
asyncio.run(main())
)py";

/// App 3: http.server's own handler with TCP_NODELAY (socketserver's standard switch), so its
/// header and body writes leave at once: a small real Python web app without the Nagle stall.
constexpr const char* nodelay_server = R"py(import functools, http.server, sys
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])),
    functools.partial(H, directory="/workspace")).serve_forever()
)py";

constexpr uint16_t app_port = 8000;     ///< the echo
constexpr uint16_t http_port = 8001;    ///< python3 -m http.server
constexpr uint16_t nodelay_port = 8002; ///< the same handler with TCP_NODELAY
constexpr size_t small_file_bytes = 1024;

/// One keep-alive HTTP/1.1 connection on a blocking socket (receive timeout 10 s).
class connection {
public:
  explicit connection(int fd)
      : fd_(fd) {
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~connection() { ::close(fd_); }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Sends `request` and reads one response with a Content-Length body; its status.
  int exchange(const std::string& request) {
    for (size_t sent = 0; sent < request.size();) {
      auto n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error(std::string{"send: "} + std::strerror(errno));
      sent += size_t(n);
    }
    for (;;) {
      auto end = buf_.find("\r\n\r\n");
      if (end != std::string::npos) {
        auto lower = buf_.substr(0, end);
        std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
        auto cl = lower.find("content-length:");
        size_t len = cl == std::string::npos ? 0 : std::stoul(lower.substr(cl + 15));
        if (buf_.size() >= end + 4 + len) {
          int status = std::stoi(buf_.substr(9, 3));
          buf_.erase(0, end + 4 + len);
          return status;
        }
      }
      char chunk[4096];
      auto n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) throw std::runtime_error("the connection ended or timed out");
      buf_.append(chunk, size_t(n));
    }
  }

private:
  int fd_;
  std::string buf_;
};

int connect_fd(int fd, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // socket_in_netns makes non-blocking sockets: the connect is made blocking first.
  int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error(std::string{"connect: "} + std::strerror(errno));
  return fd;
}

/// How a peer relay waits, and which direction it copies itself.
struct relay_mode {
  /// After handling events, the epoll set is polled (no timeout) this long before the loop
  /// blocks: a relay that stays on its CPU across a short wait (its CPU never idles, so the
  /// answer's wake-up is not a cross-CPU one into a halted vCPU).
  int spin_us = 0;
  /// The response direction spliced in the kernel: each upstream socket sits in a sockmap
  /// whose sk_skb verdict program redirects what it receives out of its client's socket
  /// (no wake-up of the relay per response).
  bool sockmap = false;
  /// The relay's CPU (-1: any): on the client's, its wake-ups by the client and of the
  /// client stay on one CPU.
  int cpu = -1;

  std::string name() const {
    if (sockmap) return "peer, sockmap response";
    if (spin_us) return "peer, epoll + " + std::to_string(spin_us) + " us spin";
    if (cpu >= 0) return "peer, epoll on CPU " + std::to_string(cpu);
    return "peer (byte relay, epoll)";
  }
  static relay_mode parse(const std::string& s) {
    relay_mode m;
    if (s == "sockmap")
      m.sockmap = true;
    else if (s.rfind("spin:", 0) == 0)
      m.spin_us = std::stoi(s.substr(5));
    else if (s.rfind("cpu:", 0) == 0)
      m.cpu = std::stoi(s.substr(4));
    else if (s != "epoll")
      throw std::runtime_error("unknown peer " + s + " (epoll, spin:US, sockmap)");
    return m;
  }
};

/// The sockmap splice of a relay's response direction, set up with the raw bpf() syscall (no
/// libbpf on the host): `up` holds the upstream sockets and runs the verdict program on what
/// each receives; `down` holds, under each upstream socket's local port, its client's socket;
/// the program redirects an upstream's bytes to the egress of `down[local_port]`.
class sockmap_splice {
public:
  sockmap_splice() {
    up_ = map();
    down_ = map();
    // r3 = skb->local_port; r2 = &down; r4 = 0; return bpf_sk_redirect_map(skb, r2, r3, r4)
    bpf_insn prog[] = {
        {BPF_LDX | BPF_MEM | BPF_W, 3, 1, int16_t(offsetof(__sk_buff, local_port)), 0},
        {BPF_LD | BPF_DW | BPF_IMM, 2, BPF_PSEUDO_MAP_FD, 0, down_},
        {0, 0, 0, 0, 0},
        {BPF_ALU64 | BPF_MOV | BPF_K, 4, 0, 0, 0},
        {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_sk_redirect_map},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    static char log[4096];
    bpf_attr a{};
    a.prog_type = BPF_PROG_TYPE_SK_SKB;
    a.insns = reinterpret_cast<uint64_t>(prog);
    a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = reinterpret_cast<uint64_t>("GPL");
    a.log_buf = reinterpret_cast<uint64_t>(log);
    a.log_size = sizeof log;
    a.log_level = 1;
    prog_ = bpf(BPF_PROG_LOAD, a);
    if (prog_ < 0) throw std::runtime_error(std::string{"sockmap: prog load: "} + log);
    bpf_attr at{};
    at.target_fd = uint32_t(up_);
    at.attach_bpf_fd = uint32_t(prog_);
    at.attach_type = BPF_SK_SKB_VERDICT;
    if (bpf(BPF_PROG_ATTACH, at) < 0)
      throw std::runtime_error(std::string{"sockmap: attach: "} + std::strerror(errno));
  }
  ~sockmap_splice() {
    for (int fd : {prog_, up_, down_})
      ::close(fd);
  }
  sockmap_splice(const sockmap_splice&) = delete;
  sockmap_splice& operator=(const sockmap_splice&) = delete;

  /// From here on what `upstream` receives leaves by `client` (both connected).
  bool splice(int client, int upstream) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    if (::getsockname(upstream, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
    uint32_t key = ntohs(a.sin_port);
    return put(down_, key, client) && put(up_, key, upstream);
  }

private:
  static int bpf(int cmd, bpf_attr& a) { return int(::syscall(__NR_bpf, cmd, &a, sizeof a)); }
  static int map() {
    bpf_attr a{};
    a.map_type = BPF_MAP_TYPE_SOCKMAP;
    a.key_size = 4;
    a.value_size = 4;
    a.max_entries = 65536; // keyed by a local port
    int fd = bpf(BPF_MAP_CREATE, a);
    if (fd < 0) throw std::runtime_error(std::string{"sockmap: "} + std::strerror(errno));
    return fd;
  }
  static bool put(int map, uint32_t key, int sock) {
    uint32_t value = uint32_t(sock);
    bpf_attr a{};
    a.map_fd = uint32_t(map);
    a.key = reinterpret_cast<uint64_t>(&key);
    a.value = reinterpret_cast<uint64_t>(&value);
    a.flags = BPF_ANY;
    return bpf(BPF_MAP_UPDATE_ELEM, a) == 0;
  }
  int up_ = -1, down_ = -1, prog_ = -1;
};

/// The peer: the cheapest relay on the same path. One epoll loop in a child process (as the
/// control plane serves a connection on one io thread of its own process) accepts on a
/// loopback port, makes a socket in the guest's netns per client connection (as the control
/// plane does, netns_socket.hpp), connects it to the app and copies bytes both ways as they
/// come: no parsing, no authorization, no lease. Its `relay_mode` variants price a spin
/// before blocking and a kernel splice of the response.
class relay_peer {
public:
  relay_peer(int netns, uint16_t app_port, relay_mode mode = {})
      : netns_(netns)
      , app_port_(app_port)
      , mode_(mode) {
    if (mode_.sockmap) splice_ = std::make_unique<sockmap_splice>();
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(listen_, 64) ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error(std::string{"peer relay: "} + std::strerror(errno));
    port_ = ntohs(a.sin_port);
    ep_ = ::epoll_create1(EPOLL_CLOEXEC);
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    add(listen_);
    add(stop_);
    // A process of its own, as the control plane is: a wake-up between two processes costs
    // more than one between two threads of the client's.
    pid_ = ::fork();
    if (pid_ < 0)
      throw std::runtime_error(std::string{"peer relay: fork: "} + std::strerror(errno));
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlives the bench
      cpu_set_t set;
      CPU_ZERO(&set);
      for (int c = 0; c < int(std::thread::hardware_concurrency()); ++c)
        if (mode_.cpu < 0 || c == mode_.cpu) CPU_SET(c, &set);
      ::sched_setaffinity(0, sizeof set, &set); // not the client's pinning (--client-cpu)
      run();
      ::_exit(0);
    }
  }
  ~relay_peer() {
    uint64_t one = 1;
    (void)!::write(stop_, &one, sizeof one); // the child's run() returns, it exits
    ::waitpid(pid_, nullptr, 0);
    for (int fd : {listen_, ep_, stop_})
      ::close(fd);
  }
  relay_peer(const relay_peer&) = delete;
  relay_peer& operator=(const relay_peer&) = delete;
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  const relay_mode& mode() const { return mode_; }

private:
  void add(int fd) {
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = fd;
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &e);
  }
  void drop(int fd) {
    auto i = pair_.find(fd);
    if (i == pair_.end()) return;
    int other = i->second;
    pair_.erase(fd);
    pair_.erase(other);
    ::close(fd); // closing removes them from the epoll set (and any sockmap)
    ::close(other);
  }
  void accept_one() {
    int c = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) return;
    auto s = local::socket_in_netns(netns_);
    if (!s) {
      ::close(c);
      return;
    }
    int u = s->release();
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(app_port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // Loopback: the connect completes or is refused at once; a pending one is waited for.
    if (::connect(u, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 && errno == EINPROGRESS) {
      pollfd p{u, POLLOUT, 0};
      ::poll(&p, 1, 5000);
    }
    int one = 1;
    for (int fd : {c, u})
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (splice_ && !splice_->splice(c, u)) {
      ::close(c);
      ::close(u);
      return;
    }
    pair_[c] = u;
    pair_[u] = c;
    add(c);
    add(u); // spliced: only its end is seen here
  }
  /// Copies what `from` has to its partner (a full socket buffer: waited for, bounded).
  void relay(int from) {
    auto i = pair_.find(from);
    if (i == pair_.end()) return;
    int to = i->second;
    char buf[64 * 1024];
    auto n = ::recv(from, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return drop(from);
    for (ssize_t sent = 0; n > 0 && sent < n;) {
      auto k = ::send(to, buf + sent, size_t(n - sent), MSG_NOSIGNAL);
      if (k > 0) {
        sent += k;
      } else if (k < 0 && errno == EAGAIN) {
        pollfd p{to, POLLOUT, 0};
        if (::poll(&p, 1, 5000) != 1) return drop(from);
      } else {
        return drop(from);
      }
    }
  }
  void run() {
    epoll_event ev[64];
    auto spin = std::chrono::microseconds{mode_.spin_us};
    auto last = clock_type::now();
    for (;;) {
      int n = mode_.spin_us ? ::epoll_wait(ep_, ev, 64, 0) : 0;
      if (n == 0 && (!mode_.spin_us || clock_type::now() - last >= spin))
        n = ::epoll_wait(ep_, ev, 64, -1);
      if (n > 0) last = clock_type::now();
      for (int k = 0; k < n; ++k) {
        int fd = ev[k].data.fd;
        if (fd == stop_) return;
        if (fd == listen_)
          accept_one();
        else
          relay(fd);
      }
    }
  }

  int netns_;
  uint16_t app_port_;
  relay_mode mode_;
  std::unique_ptr<sockmap_splice> splice_;
  uint16_t port_ = 0;
  int listen_ = -1, ep_ = -1, stop_ = -1;
  std::map<int, int> pair_; ///< each relayed socket → its partner (in the child)
  pid_t pid_ = -1;
};

struct side {
  std::string name;
  std::function<std::unique_ptr<connection>()> open;
  std::string request;
  pid_t relay = -1; ///< the relaying process whose CPU is counted (none for direct)
};

/// Sides 0-2 are direct, the peer, proxied; peer variants (--peers) follow.
enum { direct = 0, peer = 1, proxied = 2 };
using sides_t = std::vector<side*>;

/// One app's figures, by side.
struct figures {
  std::vector<std::vector<double>> lat;
  std::vector<double> rps;
  std::vector<uint64_t> errors;
  std::vector<double> cpu_ns; ///< the relay's CPU over the latency requests
};

/// Nanoseconds on CPU of all of `pid`'s threads so far (schedstat: exact, unlike ticks).
double cpu_ns_of(pid_t pid) {
  double total = 0;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator{"/proc/" + std::to_string(pid) + "/task", ec}) {
    std::ifstream f{t.path() / "schedstat"};
    double ns = 0;
    if (f >> ns) total += ns;
  }
  return total;
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5))];
}

std::string fmt(double v, int prec = 1) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::string shell(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char b[256];
    while (std::fgets(b, sizeof b, p))
      out += b;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return out;
}

std::string default_out() {
  auto src = fs::path{GUESTFLOW_SOURCE_DIR};
  char host[256] = "host";
  ::gethostname(host, sizeof host);
  auto commit = shell("git -C " + src.string() + " rev-parse --short HEAD 2>/dev/null");
  auto dirty = shell("git -C " + src.string() +
                     " status --porcelain --untracked-files=no -- . ':!bench/results' "
                     "2>/dev/null");
  std::time_t now = std::time(nullptr);
  char day[16];
  std::strftime(day, sizeof day, "%Y-%m-%d", std::gmtime(&now));
  auto base = std::string{day} + "-" + host + "-" + (commit.empty() ? "nocommit" : commit) +
              (dirty.empty() ? "" : "-dirty") + "-ingress";
  auto dir = src / "bench" / "results";
  for (int n = 1;; ++n) {
    auto p = dir / (base + (n == 1 ? "" : "-" + std::to_string(n)) + ".txt");
    if (!fs::exists(p)) return p.string();
  }
}

/// Ready: the guest's server answers through both paths (deadline 20 s, polled).
void await_ready(const sides_t& sides) {
  auto deadline = clock_type::now() + std::chrono::seconds{20};
  for (size_t k = 0; k < sides.size(); ++k)
    for (;;) {
      try {
        if (sides[k]->open()->exchange(sides[k]->request) == 200) break;
      } catch (const std::exception&) {
      }
      if (clock_type::now() > deadline)
        throw std::runtime_error(sides[k]->name + " never answered");
      std::this_thread::sleep_for(std::chrono::milliseconds{20}); // a poll period
    }
}

figures measure(const sides_t& sides, int requests, int clients, double seconds) {
  const size_t n = sides.size();
  figures f{std::vector<std::vector<double>>(n), std::vector<double>(n),
            std::vector<uint64_t>(n), std::vector<double>(n)};
  // Latency: rounds alternate the sides so that load drifts hit both alike.
  const int rounds = 10;
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < n; ++k) {
      auto c = sides[k]->open();
      c->exchange(sides[k]->request); // warm
      double cpu0 = sides[k]->relay > 0 ? cpu_ns_of(sides[k]->relay) : 0;
      struct cpu_after {
        double& sum;
        pid_t pid;
        double from;
        ~cpu_after() {
          if (pid > 0) sum += cpu_ns_of(pid) - from;
        }
      } count{f.cpu_ns[k], sides[k]->relay, cpu0};
      for (int i = 0; i < requests / rounds; ++i) {
        auto t = clock_type::now();
        if (c->exchange(sides[k]->request) != 200) throw std::runtime_error("not 200");
        f.lat[k].push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t).count());
      }
    }
  // Throughput: C keep-alive clients for T seconds, each side in turn.
  for (size_t k = 0; k < n; ++k) {
    std::atomic<uint64_t> done{0}, failed{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> ts;
    for (int c = 0; c < clients; ++c)
      ts.emplace_back([&, k] {
        try {
          auto conn = sides[k]->open();
          while (!stop.load(std::memory_order_relaxed)) {
            if (conn->exchange(sides[k]->request) == 200)
              ++done;
            else
              ++failed;
          }
        } catch (const std::exception&) {
          ++failed;
        }
      });
    auto t0 = clock_type::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); // the window
    stop = true;
    for (auto& t : ts)
      t.join();
    f.rps[k] = double(done) / std::chrono::duration<double>(clock_type::now() - t0).count();
    f.errors[k] = failed;
  }
  return f;
}

/// "goal: NAME: a / b = r x (<= / >= t x): met|MISSED".
std::string goal(const std::string& name, double a, double b, const std::string& unit,
                 bool at_most, double target) {
  double r = a / b;
  bool met = at_most ? r <= target : r >= target;
  return "goal: " + name + ": " + fmt(a, unit == "us" ? 1 : 0) + " / " +
         fmt(b, unit == "us" ? 1 : 0) + (unit == "us" ? " us" : "") + " = " + fmt(r, 2) +
         "x (" + (at_most ? "<= " : ">= ") + fmt(target, 2) +
         "x): " + (met ? "met" : "MISSED") + "\n";
}

/// One app's table and its goals, each met or MISSED: issue 40's (proxied against direct;
/// the peer against direct, the floor any relay meets), ours (proxied against the peer).
std::string report(const std::string& app, const sides_t& sides, const figures& f) {
  std::ostringstream r;
  r << app << "\n"
    << "side                               p50 us   p90 us   p99 us      req/s  errors  "
       "relay CPU us/req\n";
  for (size_t k = 0; k < sides.size(); ++k) {
    char line[240];
    auto cpu = sides[k]->relay > 0 && !f.lat[k].empty()
                   ? fmt(f.cpu_ns[k] / 1000 / double(f.lat[k].size()))
                   : std::string{"-"};
    std::snprintf(line, sizeof line, "%-32s %8.1f %8.1f %8.1f %10.0f  %-6llu  %s\n",
                  sides[k]->name.c_str(), pct(f.lat[k], 0.5), pct(f.lat[k], 0.9),
                  pct(f.lat[k], 0.99), f.rps[k], static_cast<unsigned long long>(f.errors[k]),
                  cpu.c_str());
    r << line;
  }
  auto p50 = [&](int k) { return pct(f.lat[k], 0.5); };
  r << goal("proxied p50 / direct p50 (issue 40)", p50(proxied), p50(direct), "us", true, 1.5)
    << goal("proxied req/s / direct req/s (issue 40)", f.rps[proxied], f.rps[direct], "", false,
            0.5)
    << goal("peer p50 / direct p50 (issue 40's, for the floor)", p50(peer), p50(direct), "us",
            true, 1.5)
    << goal("peer req/s / direct req/s (issue 40's, for the floor)", f.rps[peer], f.rps[direct],
            "", false, 0.5)
    << goal("proxied p50 / peer p50 (ours)", p50(proxied), p50(peer), "us", true, 1.5)
    << goal("proxied req/s / peer req/s (ours)", f.rps[proxied], f.rps[peer], "", false, 0.67)
    << "proxied minus direct p50: " << fmt(p50(proxied) - p50(direct))
    << " us; peer minus direct: " << fmt(p50(peer) - p50(direct))
    << " us; proxied minus peer: " << fmt(p50(proxied) - p50(peer)) << " us\n";
  for (size_t k = proxied + 1; k < sides.size(); ++k)
    r << goal(sides[k]->name + " p50 / direct p50 (issue 40's, a variant of the floor)", p50(k),
              p50(direct), "us", true, 1.5)
      << goal(sides[k]->name + " req/s / direct req/s", f.rps[k], f.rps[direct], "", false,
              0.5);
  r << "\n";
  return r.str();
}

std::string loadavg() {
  std::ifstream f{"/proc/loadavg"};
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

} // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string apps = "1,2,3";
  std::vector<relay_mode> variants;
  int client_cpu = -1, cp_cpu = -1;
  int requests = 3000, clients = 8;
  double seconds = 5;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return std::string{argv[++i]};
    };
    if (a == "--quick")
      quick = true;
    else if (a == "--echo-only")
      apps = "1";
    else if (a == "--client-cpu")
      client_cpu = std::stoi(next());
    else if (a == "--cp-cpu")
      cp_cpu = std::stoi(next());
    else if (a == "--apps")
      apps = next();
    else if (a == "--peers")
      for (const auto& v : split(next(), ","))
        variants.push_back(relay_mode::parse(v));
    else if (a == "--requests")
      requests = std::stoi(next());
    else if (a == "--clients")
      clients = std::stoi(next());
    else if (a == "--seconds")
      seconds = std::stod(next());
    else if (a == "--out")
      out = next();
    else {
      std::cerr << "usage: bench_ingress [--quick] [--echo-only] [--apps 1,2,3] "
                   "[--peers epoll,spin:US,cpu:N,sockmap] [--client-cpu N] [--cp-cpu N] "
                   "[--requests N] [--clients C] [--seconds T] [--out FILE]\n";
      return 2;
    }
  }
  if (quick) {
    requests = 100;
    clients = 2;
    seconds = 0.5;
  }
  const std::string key = "bench-ingress-key";
  test_support::temp_dir dir{"guestflow-bench-ingress"};
  auto load_before = loadavg();
  control_plane_process cp{dir.path() / "state", {"--api-key", key}};
  http_client api{cp.port(), key};
  auto created = api.call("POST", "/v1/sandboxes",
                          R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],)"
                          R"("ingress_enabled":true})");
  auto field = [&](const std::string& name) {
    auto at = created.body.find("\"" + name + "\":\"");
    if (at == std::string::npos) throw std::runtime_error("create: " + created.body);
    at += name.size() + 4;
    return created.body.substr(at, created.body.find('"', at) - at);
  };
  auto id = field("id");
  auto secret = field("ingress_secret");
  int rc = 0;
  try {
    auto put = [&](const std::string& path, const std::string& content) {
      if (api.call("PUT", "/v1/sandboxes/" + id + "/files?path=" + path, content).status != 200)
        throw std::runtime_error("upload of " + path + " failed");
    };
    put("/workspace/srv.py", guest_server);
    put("/workspace/nodelay.py", nodelay_server);
    put("/workspace/small.txt", std::string(small_file_bytes, 'x'));
    // The issue's example app, keep-alive; its log (one line per request) goes nowhere.
    std::string exec =
        R"({"cmd":"/bin/sh","args":["-c","setsid python3 /workspace/srv.py )" +
        std::to_string(app_port) +
        R"( >/tmp/srv.log 2>&1 </dev/null & )"
        R"(setsid python3 -m http.server --protocol HTTP/1.1 --bind 127.0.0.1 )"
        R"(--directory /workspace )" +
        std::to_string(http_port) +
        R"( >/dev/null 2>&1 </dev/null & setsid python3 /workspace/nodelay.py )" +
        std::to_string(nodelay_port) + R"( >/tmp/nodelay.log 2>&1 </dev/null &"]})";
    if (api.call("POST", "/v1/sandboxes/" + id + "/exec", exec).status != 200)
      throw std::runtime_error("exec failed");
    // The guest's init: the direct side enters its netns the way the control plane does.
    auto pid_text =
        shell("for p in $(grep -l " + id +
              " /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3 | sort -n); do "
              "[ \"$(readlink /proc/$p/ns/net)\" != \"$(readlink /proc/self/ns/net)\" ]"
              " && echo $p && break; done");
    if (pid_text.empty()) throw std::runtime_error("no process of the guest in its own netns");
    auto netns = local::open_netns_of(std::stoi(pid_text));
    if (!netns) throw std::runtime_error(netns.error().message);
    int ns = netns->get();

    // Each selected app: its peer relays (the peer, then any --peers variants) and sides.
    struct app_run {
      std::vector<std::unique_ptr<relay_peer>> relays;
      std::vector<side> storage;
      sides_t sides;
      figures f;
    };
    auto on_loopback = [](uint16_t to) {
      int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      return std::make_unique<connection>(connect_fd(fd, to));
    };
    auto make_app = [&](uint16_t port, const std::string& target) {
      auto run = std::make_unique<app_run>();
      run->relays.push_back(std::make_unique<relay_peer>(ns, port));
      for (const auto& m : variants)
        run->relays.push_back(std::make_unique<relay_peer>(ns, port, m));
      const std::string path = "/v1/sandboxes/" + id + "/ports/" + std::to_string(port);
      const std::string plain = "GET " + target + " HTTP/1.1\r\nHost: app\r\n\r\n";
      auto via = [&](const relay_peer& relay) {
        uint16_t to = relay.port();
        return side{relay.mode().name(), [on_loopback, to] { return on_loopback(to); }, plain,
                    relay.pid()};
      };
      run->storage.push_back(side{"direct (in the guest's netns)",
                                  [&, port] {
                                    auto s = local::socket_in_netns(ns);
                                    if (!s) throw std::runtime_error(s.error().message);
                                    return std::make_unique<connection>(
                                        connect_fd(s->release(), port));
                                  },
                                  plain});
      run->storage.push_back(via(*run->relays[0]));
      uint16_t cp_port = cp.port();
      run->storage.push_back(side{
          "proxied (service URL)", [on_loopback, cp_port] { return on_loopback(cp_port); },
          "GET " + path + target +
              " HTTP/1.1\r\nHost: app\r\nX-Guestflow-Ingress-Token: " + secret + "\r\n\r\n",
          cp.pid()});
      for (size_t k = 1; k < run->relays.size(); ++k)
        run->storage.push_back(via(*run->relays[k]));
      for (auto& sd : run->storage)
        run->sides.push_back(&sd);
      await_ready(run->sides);
      return run;
    };
    auto chosen = [&](char app) { return apps.find(app) != std::string::npos; };
    // Placement experiments: the bench's client threads (relays fork before and undo it)
    // and every thread of the control plane, each on one CPU.
    auto pin = [](pid_t tid, int cpu) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      if (::sched_setaffinity(tid, sizeof set, &set) != 0)
        throw std::runtime_error(std::string{"sched_setaffinity: "} + std::strerror(errno));
    };
    if (cp_cpu >= 0)
      for (const auto& t :
           fs::directory_iterator{"/proc/" + std::to_string(cp.pid()) + "/task"})
        pin(std::stoi(t.path().filename().string()), cp_cpu);
    if (client_cpu >= 0) pin(0, client_cpu);
    // http.server answers in ~44 ms here (its header and body are two writes with Nagle on:
    // the second waits for the reader's delayed ACK), so a tenth of the requests.
    const int file_requests = std::max(requests / 10, 10);
    std::unique_ptr<app_run> echo, files, nodelay;
    if (chosen('1')) {
      echo = make_app(app_port, "/");
      echo->f = measure(echo->sides, requests, clients, seconds);
    }
    // Without the stall a request is a few hundred microseconds of Python: the full count.
    if (chosen('3')) {
      nodelay = make_app(nodelay_port, "/small.txt");
      nodelay->f = measure(nodelay->sides, requests, clients, seconds);
    }
    if (chosen('2')) {
      files = make_app(http_port, "/small.txt");
      files->f = measure(files->sides, file_requests, clients, seconds);
    }
    auto report_of = [&](const std::unique_ptr<app_run>& run, const std::string& n,
                         const std::string& title) {
      return run ? report(title, run->sides, run->f)
                 : "app " + n + " skipped (--apps " + apps + ")\n\n";
    };

    std::ostringstream r;
    r << "bench_ingress: a guest's service URL against a direct connection in its netns and "
         "a peer byte relay\n"
      << "host: " << std::thread::hardware_concurrency() << " cores; load average "
      << load_before << " at start, " << loadavg()
      << " at end (other sessions share this host)\n"
      << "guest: deny-all, s-1vcpu-256mb; control plane: default workers\n"
      << "latency: " << requests << " sequential GETs per side and app on one keep-alive "
      << "connection (10 interleaved rounds); throughput: " << clients
      << " keep-alive clients, " << seconds << " s per side and app\n\n"
      << "peer: one epoll loop in a child process of the bench relaying bytes between the "
         "client's connection and a socket it made in the guest's netns (no parsing, no "
         "authorization)\n"
      << report_of(echo, "1",
                   "app 1, echo (the fixed cost of the path): asyncio HTTP/1.1 keep-alive, "
                   "2-byte body")
      << report_of(files, "2",
                   "app 2, the issue's example: python3 -m http.server --protocol HTTP/1.1 "
                   "(keep-alive), GET of a " +
                       std::to_string(small_file_bytes) + "-byte file, " +
                       std::to_string(file_requests) + " sequential GETs per side")
      << report_of(nodelay, "3",
                   "app 3, the issue's target without the Nagle stall: the same http.server "
                   "handler with disable_nagle_algorithm = True (HTTP/1.1 keep-alive), GET of "
                   "a " +
                       std::to_string(small_file_bytes) + "-byte file, " +
                       std::to_string(requests) + " sequential GETs per side")
      << "the proxied path per request on a kept connection: the token compared and the "
         "guest looked up and leased under the domain's lock, the exchange relayed over the "
         "upstream connection the previous request left (the first request of a client "
         "connection enters the guest's netns on a worker and connects)\n";
    std::cout << r.str();
    for (const auto* run : {echo.get(), files.get(), nodelay.get()})
      for (auto e : run ? run->f.errors : std::vector<uint64_t>{})
        if (e) rc = 1;
    if (!quick) {
      if (out.empty()) out = default_out();
      std::ofstream f{out};
      f << r.str();
      std::cout << "written: " << out << "\n";
    }
  } catch (const std::exception& e) {
    std::cerr << "bench_ingress: " << e.what() << "\n";
    rc = 1;
  }
  try {
    api.call("DELETE", "/v1/sandboxes/" + id);
  } catch (const std::exception& e) { // the control plane died: its guest is left, say so
    std::cerr << "bench_ingress: cannot delete " << id << ": " << e.what() << "\n";
    rc = 1;
  }
  cp.stop();
  return rc;
}
