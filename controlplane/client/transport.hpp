#pragma once

#include "controlplane/client/client.hpp"
#include "controlplane/client/connection_pool.hpp"
#include "controlplane/client/url.hpp"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace guestflow::cp {

class http_call;

/// What every call of one client shares: the io_context and its threads, the parsed base
/// URL, the TLS context, the connection pool and the registry of calls in flight (so that
/// shutdown can complete each exactly once). Calls hold it by shared_ptr, and so do the
/// I/O threads: it outlives the client object until the last handler ran.
class transport : public std::enable_shared_from_this<transport> {
public:
  /// Checks the endpoint (URL, loopback rule, TLS setup); does not start threads yet.
  static result<std::shared_ptr<transport>> make(endpoint ep, client_config cfg);

  transport(endpoint ep, client_config cfg, base_url url);
  ~transport();

  /// Starts `io_threads` threads running the io_context.
  void start();

  /// Aborts calls in flight (they complete with unavailable), closes the pool, lets the
  /// threads drain and joins them (detaches instead when called on one of them).
  void shutdown();

  /// Registers `c` and runs `begin` on a client thread; false (nothing registered or run)
  /// once shut down. Atomic with respect to shutdown, so a registered call always gets
  /// its abort and its thread time.
  bool enroll(const std::shared_ptr<http_call>& c, uint64_t& id, std::function<void()> begin);
  void withdraw(uint64_t id);

  /// Runs `f` on a client thread, or right here if the client is shut down.
  void post_or_run(std::function<void()> f);

  /// A new, unconnected connection (TLS for https).
  std::unique_ptr<connection> open_connection();

  boost::asio::io_context& ioc() noexcept { return ioc_; }
  const base_url& url() const noexcept { return url_; }
  const endpoint& ep() const noexcept { return ep_; }
  const client_config& cfg() const noexcept { return cfg_; }
  connection_pool& pool() noexcept { return pool_; }

private:
  boost::asio::io_context ioc_;
  endpoint ep_;
  client_config cfg_;
  base_url url_;
  std::optional<boost::asio::ssl::context> tls_;
  connection_pool pool_;

  mutable std::mutex mtx_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::weak_ptr<http_call>> calls_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> threads_;
};

} // namespace guestflow::cp
