#include "controlplane/local/service/auto_pause.hpp"

#include <boost/asio/post.hpp>

namespace guestflow::local {

namespace net = boost::asio;

auto_pause_timer::auto_pause_timer(net::io_context& io, net::thread_pool& workers,
                                   sandbox_service& service, std::chrono::milliseconds period)
    : timer_(io)
    , workers_(workers)
    , service_(service)
    , period_(period) {}

void auto_pause_timer::start() {
  arm();
}

void auto_pause_timer::stop() {
  stopped_ = true;
  timer_.cancel();
}

void auto_pause_timer::arm() {
  timer_.expires_after(period_);
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    if (!sweeping_) {
      sweeping_ = true;
      net::post(workers_, [this] {
        service_.pause_idle();
        net::post(timer_.get_executor(), [this] { sweeping_ = false; });
      });
    }
    arm();
  });
}

} // namespace guestflow::local
