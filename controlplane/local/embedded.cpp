#include "controlplane/local/embedded.hpp"

#include <thread>

namespace guestflow::local {
namespace {

class embedded_impl final : public embedded_control_plane {
public:
  explicit embedded_impl(std::unique_ptr<server_instance> server)
    : server_(std::move(server)), thread_([this] { server_->run(); }) {
  }

  ~embedded_impl() override {
    stop();
  }

  const std::string& unix_url() const noexcept override {
    return server_->unix_url();
  }

  const std::string& url() const noexcept override {
    return server_->url();
  }

  void stop() override {
    if (!thread_.joinable())
      return;
    server_->stop();
    thread_.join();
  }

private:
  std::unique_ptr<server_instance> server_;
  std::thread thread_;
};

bool locked_by_another(const failure& f) {
  return f.message.rfind("another control plane", 0) == 0;
}

} // namespace

result<std::unique_ptr<embedded_control_plane>>
embedded_control_plane::start(serve_options opts, std::chrono::milliseconds wait_for_lock,
                              const std::function<bool()>& stop_waiting) {
  auto deadline = std::chrono::steady_clock::now() + wait_for_lock;
  auto pause = std::chrono::milliseconds{20};
  for (;;) {
    auto started = server_instance::start(opts);
    if (started)
      return std::unique_ptr<embedded_control_plane>{new embedded_impl(std::move(*started))};
    if (!locked_by_another(started.error()) || std::chrono::steady_clock::now() >= deadline)
      return started.error();
    if (stop_waiting && stop_waiting())
      return fail(ec::guest_failed, "stopped while waiting: " + started.error().message);
    // Another guestflow owns this state dir: run after it rather than beside it.
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds{500});
  }
}

} // namespace guestflow::local
