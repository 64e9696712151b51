#pragma once

#include "controlplane/local/service/sandbox_service.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>

namespace guestflow::local {

/// Sweeps for idle guests every `period` on the I/O thread's timer; the sweep itself
/// (sandbox_service::pause_idle, which may freeze guests) runs on a worker thread, and
/// never twice at once. Re-adopted guests need no re-arming: they are simply swept.
class auto_pause_timer {
public:
  auto_pause_timer(boost::asio::io_context& io, boost::asio::thread_pool& workers,
                   sandbox_service& service, std::chrono::milliseconds period);
  void start();
  void stop();

private:
  void arm();

  boost::asio::steady_timer timer_;
  boost::asio::thread_pool& workers_;
  sandbox_service& service_;
  std::chrono::milliseconds period_;
  bool sweeping_ = false;
  bool stopped_ = false;
};

} // namespace guestflow::local
