#include "controlplane/local/embedded.hpp"

#include <thread>

namespace guestflow::local {
namespace {

class embedded_impl final : public embedded_control_plane {
public:
  explicit embedded_impl(std::unique_ptr<server_instance> server)
      : server_(std::move(server))
      , thread_([this] { server_->run(); }) {}

  ~embedded_impl() override { stop(); }

  const std::string& unix_url() const noexcept override { return server_->unix_url(); }

  const std::string& url() const noexcept override { return server_->url(); }

  void stop() override {
    if (!thread_.joinable()) return;
    server_->stop();
    thread_.join();
  }

private:
  std::unique_ptr<server_instance> server_;
  std::thread thread_;
};

} // namespace

result<std::unique_ptr<embedded_control_plane>>
embedded_control_plane::start(const serve_options& opts) {
  auto started = server_instance::start(opts);
  if (!started) return started.error();
  return std::unique_ptr<embedded_control_plane>{new embedded_impl(std::move(*started))};
}

bool embedded_control_plane::held_elsewhere(const failure& f) {
  return f.message.rfind("another control plane", 0) == 0; // state_lock's refusal
}

} // namespace guestflow::local
