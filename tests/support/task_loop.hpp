#pragma once

#include "common/lendable_loop.hpp"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <gtest/gtest.h>
#include <memory>
#include <mutex>
#include <thread>

namespace guestflow::test_support {

/// A lendable_loop that runs posted functions: what a client's I/O lane is to the
/// scheduler, without sockets. `start` gives it an owner thread that runs it the way a
/// lane's thread does (stepping aside while it is borrowed).
class task_loop final : public lendable_loop {
public:
  ~task_loop() override { stop(); }

  void post(std::function<void()> f) {
    std::lock_guard<std::mutex> guard{mtx_};
    tasks_.push_back(std::move(f));
    cv_.notify_all();
  }

  bool run_one() override {
    std::function<void()> f;
    {
      std::unique_lock<std::mutex> lock{mtx_};
      cv_.wait(lock, [&] { return !tasks_.empty() || woken_ || stopped_; });
      woken_ = false;
      if (tasks_.empty()) return !stopped_;
      f = std::move(tasks_.front());
      tasks_.pop_front();
    }
    f();
    return true;
  }

  void poll() override {
    for (;;) {
      std::function<void()> f;
      {
        std::lock_guard<std::mutex> guard{mtx_};
        if (tasks_.empty()) return;
        f = std::move(tasks_.front());
        tasks_.pop_front();
      }
      f();
    }
  }

  void wake() override {
    std::lock_guard<std::mutex> guard{mtx_};
    woken_ = true;
    ++wakes_;
    cv_.notify_all();
  }

  /// How often wake() was called.
  int wakes() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return wakes_;
  }

  /// A loop whose owner thread runs, listed for borrowers.
  static std::shared_ptr<task_loop> lent() {
    auto loop = std::make_shared<task_loop>();
    loop->start();
    lendable_loop::lend(loop);
    return loop;
  }

  /// Starts the owner thread.
  void start() {
    owner_ = std::thread([this] {
      for (;;) {
        owner_turn();
        if (!run_one()) return;
      }
    });
  }

  std::thread::id owner_id() const { return owner_.get_id(); }

  /// The thread that runs the next posted task (the owner's, or a borrower's); a failure
  /// and a default id if none runs it within 10 s.
  std::thread::id runner() {
    auto where = std::make_shared<std::promise<std::thread::id>>();
    auto got = where->get_future();
    post([where] { where->set_value(std::this_thread::get_id()); });
    if (got.wait_for(std::chrono::seconds{10}) != std::future_status::ready) {
      ADD_FAILURE() << "no thread ran the task within 10 s";
      return {};
    }
    return got.get();
  }

  /// Takes the loop back, lets the owner thread end and joins it.
  void stop() {
    reclaim();
    {
      std::lock_guard<std::mutex> guard{mtx_};
      stopped_ = true;
      cv_.notify_all();
    }
    if (owner_.joinable()) owner_.join();
  }

private:
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool woken_ = false;
  bool stopped_ = false;
  int wakes_ = 0;
  std::thread owner_;
};

} // namespace guestflow::test_support
