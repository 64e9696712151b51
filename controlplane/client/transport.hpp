#pragma once

#include "common/lendable_loop.hpp"
#include "controlplane/client/client.hpp"
#include "controlplane/client/connection_pool.hpp"
#include "controlplane/client/url.hpp"

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace guestflow::cp {

class http_call; // http_call.hpp: the calls that wait in an io_lane's connection_waiters

/// One I/O thread with its own io_context and connection pool. A call and its connection
/// stay on one lane from start to finish, so the handlers of a call run on one thread at a
/// time (the lane's, or the scheduler worker it is lent to: `loop`) and none needs a
/// strand; a plain connection reads into the lane's one buffer.
struct io_lane {
  io_lane()
      : ioc(1) {}
  boost::asio::io_context ioc;
  std::optional<connection_pool> pool;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::thread thread;
  /// The io_context as a loop a scheduler may borrow (null: not lent; `thread` runs it).
  std::shared_ptr<lendable_loop> loop;
  static constexpr size_t read_buffer_size = 64 * 1024;
  std::unique_ptr<char[]> read_buffer{new char[read_buffer_size]};
  /// Calls waiting for a connection because the (Unix) control plane's accept queue is
  /// full, or because this process has no descriptor for a new one: a connection another
  /// call is done with goes to the oldest of them instead of the pool. Entries of calls
  /// that stopped waiting are skipped.
  std::deque<std::weak_ptr<http_call>> connection_waiters;
};

/// A call in flight as the transport's registry sees it: begun on its lane's thread when
/// enrolled, aborted when the transport shuts down. http_call (http_call.hpp) is the one
/// kind; knowing calls only through this keeps the transport below it (http_call uses the
/// transport, never the other way round).
class inflight_call {
public:
  virtual ~inflight_call() = default;
  /// The call's first step, on its lane's thread.
  virtual void begin() = 0;
  /// Ends the call with `why` unless it already completed. Any thread.
  virtual void abort(failure why) = 0;
  /// The call, held while shutdown aborts it; null once it is being destroyed.
  virtual std::shared_ptr<inflight_call> hold() = 0;

private:
  friend class transport;
  /// The intrusive links of the registry of calls in flight: enrolling and withdrawing a
  /// call allocates nothing.
  inflight_call* prev_ = nullptr;
  inflight_call* next_ = nullptr;
};

/// What every call of one client shares: the I/O lanes and their threads, the parsed base
/// URL, the TLS context and the registry of calls in flight (so that shutdown can complete
/// each exactly once). Calls hold it by shared_ptr, and so do the I/O threads: it outlives
/// the client object until the last handler ran.
class transport : public std::enable_shared_from_this<transport> {
public:
  /// Checks the endpoint (URL, loopback rule, TLS setup); does not start threads yet.
  static result<std::shared_ptr<transport>> make(endpoint ep, client_config cfg);

  transport(endpoint ep, client_config cfg, base_url url);
  ~transport();

  /// Starts one thread per lane (`io_threads` lanes).
  void start();

  /// Aborts calls in flight (they complete with unavailable), closes the pools, lets the
  /// threads drain and joins them (detaches instead when called on one of them).
  void shutdown();

  /// The lane for a new call (round robin).
  io_lane& pick() noexcept {
    return *lanes_[lanes_.size() == 1 ? 0 : next_lane_.fetch_add(1) % lanes_.size()];
  }

  /// Registers `c` and begins it on `lane`'s thread; false (nothing registered or run)
  /// once shut down. Atomic with respect to shutdown, so a registered call always gets its
  /// abort and its thread time.
  bool enroll(const std::shared_ptr<inflight_call>& c, io_lane& lane);
  void withdraw(inflight_call* c);

  /// Runs `f` on a client thread, or right here if the client is shut down.
  void post_or_run(std::function<void()> f);

  /// A new, unconnected connection on `lane` (TLS for https).
  std::unique_ptr<connection> open_connection(io_lane& lane);

  const base_url& url() const noexcept { return url_; }
  const endpoint& ep() const noexcept { return ep_; }
  const client_config& cfg() const noexcept { return cfg_; }

private:
  endpoint ep_;
  client_config cfg_;
  base_url url_;
  std::optional<boost::asio::ssl::context> tls_;
  std::vector<std::unique_ptr<io_lane>> lanes_;
  std::atomic<size_t> next_lane_{0};

  mutable std::mutex mtx_;
  bool stopping_ = false;
  inflight_call* calls_ = nullptr; ///< head of the intrusive list of calls in flight
};

} // namespace guestflow::cp
