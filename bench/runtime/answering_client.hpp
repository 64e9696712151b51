#pragma once

// bench_runtime's `--transport memory`: a control-plane client that makes no request. Each
// call is answered with the success a simulated control plane would give, after the same
// latency, from a thread of its own. With it the runtime runs exactly as it does over a
// socket (same actors, same messages, same threads, completions arriving from another
// thread), minus the client's I/O, HTTP and JSON: the actors' part of the CPU per run,
// measured rather than inferred. A bench double only, like --simulate-latency-ms.

#include "controlplane/client/client.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <pthread.h>
#include <string>
#include <thread>

namespace guestflow::bench {

class answering_client : public cp::client {
public:
  explicit answering_client(std::chrono::milliseconds latency)
      : cp::client(cp::endpoint{})
      , core_(std::make_shared<core>(latency))
      , thread_([c = core_] { run(*c); }) {}

  ~answering_client() override { shutdown(); }

  void create(const sandbox_create_request& req, cp::millis,
              cp::callback<sandbox_created> cb) override {
    sandbox_created c;
    c.id = "sb-" + std::to_string(++next_id_);
    c.name = req.name.value_or("");
    c.shape = req.shape;
    c.rootfs = req.rootfs.value_or("");
    answer(std::move(cb), std::move(c));
  }
  void put_file(const std::string&, const std::string&, shared_bytes, cp::millis,
                cp::callback<bool> cb) override {
    answer(std::move(cb), true);
  }
  void exec(const std::string&, const exec_request&, cp::millis,
            cp::callback<exec_result> cb) override {
    exec_result r;
    r.stdout_text = "hello from a guest\n";
    answer(std::move(cb), std::move(r));
  }
  void remove(const std::string& id, cp::millis, cp::callback<sandbox_deleted> cb) override {
    answer(std::move(cb), sandbox_deleted{id, sandbox_status::destroyed});
  }

  // A code run makes only the 4 calls above; anything else is refused, never faked.
  void shapes(cp::millis, cp::callback<shape_list> cb) override { refuse(std::move(cb)); }
  void who(cp::millis, cp::callback<whoami> cb) override { refuse(std::move(cb)); }
  void capabilities_of(cp::millis, cp::callback<capabilities> cb) override {
    refuse(std::move(cb));
  }
  void get(const std::string&, cp::millis, cp::callback<sandbox_view> cb) override {
    refuse(std::move(cb));
  }
  void list(const std::string&, uint32_t, uint32_t, cp::millis,
            cp::callback<sandbox_list> cb) override {
    refuse(std::move(cb));
  }
  void get_file(const std::string&, const std::string&, size_t, cp::millis,
                cp::callback<std::string> cb) override {
    refuse(std::move(cb));
  }
  std::shared_ptr<cp::stream_handle> exec_stream(const std::string&, const exec_request&,
                                                 cp::millis,
                                                 cp::exec_stream_callbacks cbs) override {
    refuse(std::move(cbs.on_done));
    return std::make_shared<no_stream>();
  }
  void get_egress(const std::string&, cp::millis, cp::callback<egress_body> cb) override {
    refuse(std::move(cb));
  }
  void put_egress(const std::string&, const egress_policy&, cp::millis,
                  cp::callback<egress_body> cb) override {
    refuse(std::move(cb));
  }
  void pause(const std::string&, cp::millis, cp::callback<sandbox_view> cb) override {
    refuse(std::move(cb));
  }
  void resume(const std::string&, cp::millis, cp::callback<sandbox_view> cb) override {
    refuse(std::move(cb));
  }

  /// Pending calls complete with `unavailable` before this returns, as the real client's do
  /// (unless called from one of its own answers: then right after that answer).
  void shutdown() override {
    {
      std::lock_guard<std::mutex> guard{core_->mtx};
      if (core_->stopping) return;
      core_->stopping = true;
    }
    core_->cv.notify_one();
    if (!thread_.joinable()) return;
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach(); // its last owner went in one of its answers; it holds the core
    else
      thread_.join();
  }

private:
  using steady = std::chrono::steady_clock;
  struct pending {
    steady::time_point due;
    std::function<void(bool)> complete; ///< false: answer `unavailable`
  };
  struct no_stream : cp::stream_handle {
    void cancel() override {}
  };

  template<class T>
  void answer(cp::callback<T> cb, T value) {
    enqueue([cb = std::move(cb), v = std::move(value)](bool ok) mutable {
      if (ok)
        cb(std::move(v));
      else
        cb(fail(ec::unavailable, "the bench's in-memory client shut down"));
    });
  }

  template<class T>
  void refuse(cp::callback<T> cb) {
    enqueue([cb = std::move(cb)](bool) {
      cb(fail(ec::unavailable, "the bench's in-memory client answers code runs' calls only"));
    });
  }

  /// What the thread works on; the thread holds it too, so it may outlive the client.
  struct core {
    explicit core(std::chrono::milliseconds l)
        : latency(l) {}
    std::chrono::milliseconds latency;
    std::mutex mtx;
    std::condition_variable cv;
    std::deque<pending> queue;
    bool stopping = false;
  };

  void enqueue(std::function<void(bool)> complete) {
    std::unique_lock<std::mutex> guard{core_->mtx};
    if (core_->stopping) {
      guard.unlock();
      return complete(false);
    }
    // Every call waits the same latency, so due times arrive in order: a FIFO, and the
    // thread needs waking only when it had nothing to wait for.
    bool was_empty = core_->queue.empty();
    core_->queue.push_back({steady::now() + core_->latency, std::move(complete)});
    guard.unlock();
    if (was_empty) core_->cv.notify_one();
  }

  static void run(core& c) {
    ::pthread_setname_np(::pthread_self(), "client-io");
    std::deque<pending> due;
    std::unique_lock<std::mutex> guard{c.mtx};
    for (;;) {
      if (c.stopping) break;
      if (c.queue.empty()) {
        c.cv.wait(guard);
        continue;
      }
      auto now = steady::now();
      if (c.queue.front().due > now) {
        c.cv.wait_until(guard, c.queue.front().due);
        continue;
      }
      while (!c.queue.empty() && c.queue.front().due <= now) {
        due.push_back(std::move(c.queue.front()));
        c.queue.pop_front();
      }
      guard.unlock();
      for (auto& p : due)
        p.complete(true);
      due.clear();
      guard.lock();
    }
    auto left = std::move(c.queue);
    guard.unlock();
    for (auto& p : left)
      p.complete(false);
  }

  std::atomic<uint64_t> next_id_{0};
  std::shared_ptr<core> core_;
  std::thread thread_; ///< last: starts once the core exists
};

} // namespace guestflow::bench
