// A guest's service URL against a direct connection inside the guest's own network
// namespace, in one run, on a real control plane and a real deny-all guest:
//
//   latency: sequential GETs on one keep-alive connection, proxied (client → control plane →
//   a socket made in the guest's netns → the guest's server) and direct (a socket made in
//   the guest's netns by this process → the guest's server), interleaved in rounds;
//   throughput: C clients each on its own keep-alive connection for T seconds, each way.
//
// Two apps in the guest, each measured both ways with its own ratios: a small asyncio
// HTTP/1.1 echo (keep-alive, a fixed 2-byte body: the fixed cost of the path, not an app) and
// the issue's own example app, `python3 -m http.server --protocol HTTP/1.1` (keep-alive)
// serving a 1 KiB file. Targets (issue 40): proxied p50 <= 1.5x direct, proxied requests/s
// >= 0.5x direct. Needs root (guests; entering the guest's netns).
//   bench_ingress [--quick] [--requests N] [--clients C] [--seconds T] [--out FILE]
// Without --out (and without --quick) the report goes to bench/results/
// <date>-<host>-<commit>-ingress.txt (never overwritten: -2, -3… when taken).
#include "controlplane/local/network/netns_socket.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sstream>
#include <stdexcept>
#include <string>
#include <sys/socket.h>
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

constexpr uint16_t app_port = 8000;  ///< the echo
constexpr uint16_t http_port = 8001; ///< python3 -m http.server
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

struct side {
  std::string name;
  std::function<std::unique_ptr<connection>()> open;
  std::string request;
};

/// One app's figures: [0] direct, [1] proxied.
struct figures {
  std::vector<double> lat[2];
  double rps[2] = {0, 0};
  uint64_t errors[2] = {0, 0};
};

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
void await_ready(side* sides[2]) {
  auto deadline = clock_type::now() + std::chrono::seconds{20};
  for (int k = 0; k < 2; ++k)
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

figures measure(side* sides[2], int requests, int clients, double seconds) {
  figures f;
  // Latency: rounds alternate the sides so that load drifts hit both alike.
  const int rounds = 10;
  for (int r = 0; r < rounds; ++r)
    for (int k = 0; k < 2; ++k) {
      auto c = sides[k]->open();
      c->exchange(sides[k]->request); // warm
      for (int i = 0; i < requests / rounds; ++i) {
        auto t = clock_type::now();
        if (c->exchange(sides[k]->request) != 200) throw std::runtime_error("not 200");
        f.lat[k].push_back(
            std::chrono::duration<double, std::micro>(clock_type::now() - t).count());
      }
    }
  // Throughput: C keep-alive clients for T seconds, each side in turn.
  for (int k = 0; k < 2; ++k) {
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

/// One app's table and its two goals, each met or MISSED.
std::string report(const std::string& app, side* sides[2], const figures& f) {
  std::ostringstream r;
  r << app << "\n"
    << "side                               p50 us   p90 us   p99 us      req/s  errors\n";
  for (int k = 0; k < 2; ++k) {
    char line[200];
    std::snprintf(line, sizeof line, "%-32s %8.1f %8.1f %8.1f %10.0f  %llu\n",
                  sides[k]->name.c_str(), pct(f.lat[k], 0.5), pct(f.lat[k], 0.9),
                  pct(f.lat[k], 0.99), f.rps[k], static_cast<unsigned long long>(f.errors[k]));
    r << line;
  }
  double p50_ratio = pct(f.lat[1], 0.5) / pct(f.lat[0], 0.5);
  double rps_ratio = f.rps[1] / f.rps[0];
  r << "goal: proxied p50 / direct p50:   " << fmt(pct(f.lat[1], 0.5)) << " / "
    << fmt(pct(f.lat[0], 0.5)) << " us = " << fmt(p50_ratio, 2)
    << "x (<= 1.5x): " << (p50_ratio <= 1.5 ? "met" : "MISSED") << "\n"
    << "goal: proxied req/s / direct req/s: " << fmt(f.rps[1], 0) << " / " << fmt(f.rps[0], 0)
    << " = " << fmt(rps_ratio, 2) << "x (>= 0.5x): " << (rps_ratio >= 0.5 ? "met" : "MISSED")
    << "\n"
    << "proxied minus direct p50: " << fmt(pct(f.lat[1], 0.5) - pct(f.lat[0], 0.5))
    << " us\n\n";
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
    else if (a == "--requests")
      requests = std::stoi(next());
    else if (a == "--clients")
      clients = std::stoi(next());
    else if (a == "--seconds")
      seconds = std::stod(next());
    else if (a == "--out")
      out = next();
    else {
      std::cerr << "usage: bench_ingress [--quick] [--requests N] [--clients C] [--seconds T] "
                   "[--out FILE]\n";
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
    put("/workspace/small.txt", std::string(small_file_bytes, 'x'));
    // The issue's example app, keep-alive; its log (one line per request) goes nowhere.
    std::string exec = R"({"cmd":"/bin/sh","args":["-c","setsid python3 /workspace/srv.py )" +
                       std::to_string(app_port) +
                       R"( >/tmp/srv.log 2>&1 </dev/null & )"
                       R"(setsid python3 -m http.server --protocol HTTP/1.1 --bind 127.0.0.1 )"
                       R"(--directory /workspace )" +
                       std::to_string(http_port) + R"( >/dev/null 2>&1 </dev/null &"]})";
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

    auto make_sides = [&](uint16_t port, const std::string& target) {
      const std::string path = "/v1/sandboxes/" + id + "/ports/" + std::to_string(port);
      return std::array<side, 2>{
          side{"direct (in the guest's netns)",
               [&, port] {
                 auto s = local::socket_in_netns(ns);
                 if (!s) throw std::runtime_error(s.error().message);
                 return std::make_unique<connection>(connect_fd(s->release(), port));
               },
               "GET " + target + " HTTP/1.1\r\nHost: app\r\n\r\n"},
          side{"proxied (service URL)",
               [&] {
                 int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                 return std::make_unique<connection>(connect_fd(fd, cp.port()));
               },
               "GET " + path + target +
                   " HTTP/1.1\r\nHost: app\r\nX-Guestflow-Ingress-Token: " + secret +
                   "\r\n\r\n"}};
    };
    auto echo = make_sides(app_port, "/");
    auto files = make_sides(http_port, "/small.txt");
    side* echo_sides[2] = {&echo[0], &echo[1]};
    side* file_sides[2] = {&files[0], &files[1]};
    await_ready(echo_sides);
    await_ready(file_sides);
    auto echo_figures = measure(echo_sides, requests, clients, seconds);
    // http.server answers in ~44 ms here (its header and body are two writes with Nagle on:
    // the second waits for the reader's delayed ACK), so a tenth of the requests.
    const int file_requests = std::max(requests / 10, 10);
    auto file_figures = measure(file_sides, file_requests, clients, seconds);

    std::ostringstream r;
    r << "bench_ingress: a guest's service URL against a direct connection in its netns\n"
      << "host: " << std::thread::hardware_concurrency() << " cores; load average "
      << load_before << " at start, " << loadavg()
      << " at end (other sessions share this host)\n"
      << "guest: deny-all, s-1vcpu-256mb; control plane: default workers\n"
      << "latency: " << requests << " sequential GETs per side and app on one keep-alive "
      << "connection (10 interleaved rounds); throughput: " << clients
      << " keep-alive clients, " << seconds << " s per side and app\n\n"
      << report("app 1, echo (the fixed cost of the path): asyncio HTTP/1.1 keep-alive, "
                "2-byte body",
                echo_sides, echo_figures)
      << report("app 2, the issue's example: python3 -m http.server --protocol HTTP/1.1 "
                "(keep-alive), GET of a " +
                    std::to_string(small_file_bytes) + "-byte file, " +
                    std::to_string(file_requests) + " sequential GETs per side",
                file_sides, file_figures)
      << "the proxied path per request on a kept connection: the token compared and the "
         "guest looked up and leased under the domain's lock, the exchange relayed over the "
         "upstream connection the previous request left (the first request of a client "
         "connection enters the guest's netns on a worker and connects)\n";
    std::cout << r.str();
    for (const auto* f : {&echo_figures, &file_figures})
      if (f->errors[0] || f->errors[1]) rc = 1;
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
  api.call("DELETE", "/v1/sandboxes/" + id);
  cp.stop();
  return rc;
}
