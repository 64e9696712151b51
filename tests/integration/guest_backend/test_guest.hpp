#pragma once

#include "controlplane/local/guests/guest_backend.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

/// Helpers shared by the guest backend tests: a fresh state dir per test, a backend on it,
/// specs, and running a command to completion with a deadline.
namespace guestflow::local::test {

using namespace std::chrono_literals;

/// A unique token (per process and call) for ids and argv markers.
std::string unique_token(const std::string& prefix);

using test_support::eventually;
using test_support::temp_dir;

/// A deny-all (no network) debian:12 guest spec with `mem_mib` of memory.
guest_spec make_spec(uint64_t mem_mib = 256, egress_policy egress = egress_policy::deny_all());

struct run_result {
  int exit_code = -1;
  std::string out;
  std::string err;
  bool timed_out = false;
};

/// Runs `argv` in the guest and waits (bounded) for exit and EOF on both pipes.
run_result run(guest_backend& b, const guest_runtime& g, const std::vector<std::string>& argv,
               const std::map<std::string, std::string>& envs = {},
               std::chrono::milliseconds timeout = 20s);

/// Reads what is available within `wait` from a non-blocking fd (appends to `into`);
/// returns false at EOF.
bool read_for(int fd, std::string& into, std::chrono::milliseconds wait);

/// Host pids whose /proc/<pid>/cmdline contains `marker`.
std::vector<pid_t> pids_with_marker(const std::string& marker);

/// A TCP listener on the host that greets every connection with `greeting\n`.
class tcp_server {
public:
  /// Listens on `fd` (already bound and listening).
  tcp_server(int fd, std::string greeting);
  ~tcp_server();
  uint16_t port() const;
  int accepted() const;

  /// A listener on `address`:0 in the current network namespace.
  static std::unique_ptr<tcp_server> on(const std::string& address, std::string greeting);

private:
  struct state;
  std::shared_ptr<state> s_;
};

/// The guest-side probe: python connects to host:port with a 3 s timeout and prints
/// "OK <greeting>" or "FAIL <error>".
std::string probe(guest_backend& b, const guest_runtime& g, const std::string& host,
                  uint16_t port);

} // namespace guestflow::local::test
