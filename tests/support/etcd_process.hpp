#pragma once

// A real etcd for the fleet's tests and benches (tests/support: link `test_etcd`).

#include "tests/support/temp_dir.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <sys/types.h>

namespace guestflow::test_support {

/// `/usr/bin/etcd` as a child process: a single member on 127.0.0.1 with free ports picked
/// at start (client and peer) and its data dir in a temp_dir. The constructor returns once
/// etcd answers a read (deadline below); it throws std::runtime_error with etcd's log if it
/// does not. The destructor SIGKILLs it and removes the data.
class etcd_process {
public:
  explicit etcd_process(std::chrono::milliseconds ready_within = std::chrono::seconds{30});
  ~etcd_process();
  etcd_process(const etcd_process&) = delete;
  etcd_process& operator=(const etcd_process&) = delete;

  /// "etcd://127.0.0.1:PORT" — what `--fleet` and `GUESTFLOW_FLEET` take.
  std::string url() const;
  /// "http://127.0.0.1:PORT" (etcdctl's --endpoints).
  std::string client_url() const;
  uint16_t client_port() const { return client_port_; }
  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }

  /// SIGTERM and wait for it to exit (SIGKILL after `timeout`).
  void stop(std::chrono::milliseconds timeout = std::chrono::seconds{10});
  /// SIGKILL and reap: etcd lost without a goodbye.
  void kill();
  /// Starts it again on the same ports and data dir (a stopped or killed one); its keys and
  /// leases are back (a lease's TTL restarts from its full value, as etcd does).
  void restart(std::chrono::milliseconds ready_within = std::chrono::seconds{30});

  /// etcd's log so far.
  std::string log_text() const;

private:
  void start(std::chrono::milliseconds ready_within);

  temp_dir dir_{"guestflow-etcd"};
  uint16_t client_port_ = 0;
  uint16_t peer_port_ = 0;
  pid_t pid_ = -1;
};

} // namespace guestflow::test_support
