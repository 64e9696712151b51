#include "apps/signal_watch.hpp"

#include <csignal>
#include <mutex>
#include <pthread.h>
#include <utility>

namespace guestflow::cli {
namespace {

sigset_t watched() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR2); // private wake-up for shutdown
  return set;
}

} // namespace

signal_watch::signal_watch() {
  auto set = watched();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this] {
    auto set = watched();
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0 || sig == SIGUSR2) return;
      received_ = sig;
      std::function<void(int)> f;
      {
        std::lock_guard<std::mutex> guard{mu_};
        f = handler_;
        if (!f) unhandled_ = sig;
      }
      if (f) f(sig);
    }
  });
}

signal_watch::~signal_watch() {
  pthread_kill(thread_.native_handle(), SIGUSR2);
  thread_.join();
}

void signal_watch::on_signal(std::function<void(int)> f) {
  int missed = 0;
  {
    std::lock_guard<std::mutex> guard{mu_};
    handler_ = std::move(f);
    if (handler_) missed = std::exchange(unhandled_, 0);
    if (!missed) return;
    f = handler_;
  }
  f(missed);
}

} // namespace guestflow::cli
