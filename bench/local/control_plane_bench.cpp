// bench_control_plane [--iterations N] [--warmup N] [--simulate-latency-ms N]
//
// Starts `guestflow control-plane` on 127.0.0.1:0 with a temp state dir, then N times:
// create (deny-all egress, as bwrap --unshare-net) → exec `true` → delete, timing
// create-to-first-output (POST /v1/sandboxes sent → exec reply received). In the same
// run, N times the raw `setpriv … bwrap <the backend's namespace flags> true` it is
// built on. Prints median/p99 of both and their ratio (target ≤ 2×).
#include "messages/jsend.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/control_plane/control_plane_process.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace guestflow;
using namespace guestflow::testing;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

struct stats {
  double median = 0, p99 = 0, min = 0;
};

stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
  };
  return {at(0.5), at(0.99), v.front()};
}

std::string data_of(const http_reply& r, const char* what) {
  auto env = decode<jsend>(r.body);
  if (r.status != 200 || !env || env->status != jsend::kind::success)
    throw std::runtime_error(std::string{what} + " failed: " + std::to_string(r.status) + " " +
                             r.body);
  return env->data.text;
}

/// The raw launch the backend wraps: same namespaces and mounts, no cgroups, no records.
double raw_bwrap_true() {
  std::vector<std::string> args = {"/usr/bin/setpriv",
                                   "--reuid=60000",
                                   "--regid=60000",
                                   "--clear-groups",
                                   "/usr/bin/bwrap",
                                   "--unshare-user",
                                   "--unshare-pid",
                                   "--unshare-ipc",
                                   "--unshare-uts",
                                   "--unshare-cgroup",
                                   "--unshare-net",
                                   "--die-with-parent",
                                   "--new-session",
                                   "--disable-userns",
                                   "--clearenv",
                                   "--ro-bind",
                                   "/usr",
                                   "/usr",
                                   "--symlink",
                                   "usr/lib",
                                   "/lib",
                                   "--symlink",
                                   "usr/lib64",
                                   "/lib64",
                                   "--symlink",
                                   "usr/bin",
                                   "/bin",
                                   "--symlink",
                                   "usr/sbin",
                                   "/sbin",
                                   "--proc",
                                   "/proc",
                                   "--dev",
                                   "/dev",
                                   "--perms",
                                   "1777",
                                   "--tmpfs",
                                   "/tmp",
                                   "--chdir",
                                   "/",
                                   "--",
                                   "/usr/bin/true"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  auto t0 = clock_type::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  auto ms = ms_since(t0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    throw std::runtime_error("raw bwrap true failed (status " + std::to_string(st) + ")");
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  int iterations = 50, warmup = 3;
  std::vector<std::string> server_args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--iterations" && i + 1 < argc)
      iterations = std::stoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc)
      warmup = std::stoi(argv[++i]);
    else if (a == "--simulate-latency-ms" && i + 1 < argc)
      server_args = {"--simulate-latency-ms", argv[++i]};
    else {
      std::cerr << "usage: bench_control_plane [--iterations N] [--warmup N] "
                   "[--simulate-latency-ms N]\n";
      return 2;
    }
  }
  try {
    temp_dir dir;
    control_plane_process cp{dir.path() / "state", server_args};
    http_client client{cp.port()};
    std::vector<double> first_output, spawn, exec_ms, destroy, raw;
    for (int i = 0; i < warmup + iterations; ++i) {
      auto t0 = clock_type::now();
      auto created = decode<sandbox_created>(
          data_of(client.call("POST", "/v1/sandboxes",
                              R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})"),
                  "create"));
      if (!created) throw std::runtime_error("create: " + created.error().message);
      auto t1 = clock_type::now();
      auto r = decode<exec_result>(
          data_of(client.call("POST", "/v1/sandboxes/" + created->id + "/exec",
                              R"({"cmd":"/usr/bin/true"})"),
                  "exec"));
      auto to_output = ms_since(t0);
      auto exec_took = ms_since(t1);
      if (!r || r->exit_code != 0) throw std::runtime_error("exec true did not exit 0");
      auto t2 = clock_type::now();
      data_of(client.call("DELETE", "/v1/sandboxes/" + created->id), "delete");
      auto destroy_took = ms_since(t2);
      auto raw_took = raw_bwrap_true(); // interleaved: same machine state for both
      if (i < warmup) continue;
      first_output.push_back(to_output);
      spawn.push_back(static_cast<double>(created->spawn_ms));
      exec_ms.push_back(exec_took);
      destroy.push_back(destroy_took);
      raw.push_back(raw_took);
    }
    auto print = [](const char* name, const stats& s) {
      std::printf("%-34s median %8.2f ms   p99 %8.2f ms   min %8.2f ms\n", name, s.median,
                  s.p99, s.min);
    };
    auto fo = summarize(first_output), rw = summarize(raw);
    std::printf("control plane create→exec(true)→delete, %d iterations (%d warm-up)%s\n",
                iterations, warmup, server_args.empty() ? "" : " [SIMULATED domain]");
    print("create-to-first-output", fo);
    print("  create (server spawn_ms)", summarize(spawn));
    print("  exec true (client-side)", summarize(exec_ms));
    print("  delete (client-side)", summarize(destroy));
    print("raw setpriv+bwrap … true", rw);
    std::printf(
        "ratio create-to-first-output / raw bwrap: median %.2fx  p99 %.2fx  (target <= 2x)\n",
        fo.median / rw.median, fo.p99 / rw.p99);
    return cp.stop() == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "bench_control_plane: " << e.what() << '\n';
    return 1;
  }
}
