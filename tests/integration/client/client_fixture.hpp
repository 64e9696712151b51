#pragma once

#include "controlplane/client/client.hpp"
#include "tests/integration/client/loopback_server.hpp"

#include <atomic>
#include <chrono>
#include <future>
#include <gtest/gtest.h>
#include <memory>
#include <thread>

namespace gft {

using namespace std::chrono_literals;
using guestflow::ec;
using guestflow::failure;
using guestflow::result;

/// Captures the one completion of a call: its value, how often the callback ran (must be
/// exactly once) and on which thread.
template<class T>
struct outcome : std::enable_shared_from_this<outcome<T>> {
  std::promise<result<T>> promise;
  std::future<result<T>> future = promise.get_future();
  std::atomic<int> calls{0};
  std::thread::id thread;

  guestflow::cp::callback<T> cb() {
    return [self = this->shared_from_this()](result<T> r) {
      self->thread = std::this_thread::get_id();
      if (self->calls.fetch_add(1) == 0) self->promise.set_value(std::move(r));
    };
  }

  /// The result (a failure naming the problem if none came within `max`).
  result<T> get(std::chrono::milliseconds max = 20s) {
    if (future.wait_for(max) != std::future_status::ready) {
      ADD_FAILURE() << "the call never completed";
      return guestflow::fail(ec::guest_failed, "test: no completion");
    }
    return future.get();
  }
};

template<class T>
std::shared_ptr<outcome<T>> expect() {
  return std::make_shared<outcome<T>>();
}

/// A fresh loopback server and a client on it with short retry delays.
class cp_client : public ::testing::Test {
protected:
  void SetUp() override;
  void TearDown() override;

  std::shared_ptr<guestflow::cp::client> make_client(guestflow::cp::endpoint ep,
                                                     guestflow::cp::client_config cfg);
  std::shared_ptr<guestflow::cp::client> make_client(guestflow::cp::client_config cfg);
  guestflow::cp::client_config fast_config() const;

  std::unique_ptr<loopback_server> srv;
  std::shared_ptr<guestflow::cp::client> cl;
};

/// An endpoint at `url` (provider local, no extra CA).
guestflow::cp::endpoint at(std::string url, std::string key = "", bool verify = true);

/// `{"status":"fail","data":{"message":…}}`.
std::string fail_body(std::string_view message);
/// `{"status":"error","message":…,"code":…}`.
std::string error_body(std::string_view message, int code);

/// Some well-formed wire values.
std::string view_json(std::string_view id, std::string_view status);

} // namespace gft
