#include "controlplane/local/embedded.hpp"

#include "common/text.hpp"

#include <algorithm>
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

result<warm_pool_spec> embedded_warm_pool(const std::optional<std::string>& env_value,
                                          warm_pool_default fallback,
                                          const host_guests& guests) {
  if (fallback == warm_pool_default::off) return warm_pool_spec{};
  if (env_value && !trim(*env_value).empty())
    return parse_warm_pool_spec(*env_value, "GUESTFLOW_WARM_POOL");
  if (fallback != warm_pool_default::host) return warm_pool_spec{};
  auto avail = mem_available_mib();
  warm_pool_spec out;
  if (guests.sandbox) out = default_host_warm_pool(avail);
  if (guests.executor)
    if (auto t = default_executor_pool(*guests.executor, avail)) {
      auto same = std::find_if(out.begin(), out.end(),
                               [&](const pool_target& o) { return o.key == t->key; });
      if (same == out.end()) {
        t->optional = true;
        out.push_back(std::move(*t));
      } else { // the executor runs in the sandbox guest: one pool, the larger bounds
        same->count = std::max(same->count, t->count);
        same->cap = std::max(same->cap, t->cap);
      }
    }
  return out;
}

bool embedded_control_plane::held_elsewhere(const failure& f) {
  return f.message.rfind("another control plane", 0) == 0; // state_lock's refusal
}

} // namespace guestflow::local
