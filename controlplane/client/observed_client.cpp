#include "controlplane/client/observed_client.hpp"

namespace guestflow::cp {

namespace {

using clock = std::chrono::steady_clock;

class observed_client final : public client {
public:
  observed_client(std::shared_ptr<client> inner, call_latency& latency)
      : client(inner->where())
      , inner_(std::move(inner))
      , latency_(latency) {}

  void shapes(millis t, callback<shape_list> cb) override { inner_->shapes(t, timed(cb)); }
  void who(millis t, callback<whoami> cb) override { inner_->who(t, timed(cb)); }
  void capabilities_of(millis t, callback<capabilities> cb) override {
    inner_->capabilities_of(t, timed(cb));
  }
  void capacity(millis t, callback<node_capacity> cb) override {
    inner_->capacity(t, timed(cb));
  }
  const client* wrapped() const noexcept override { return inner_.get(); }
  void endpoint_of(const std::string& id, millis t, callback<endpoint> cb) override {
    inner_->endpoint_of(id, t, std::move(cb));
  }
  void create(const sandbox_create_request& req, millis t,
              callback<sandbox_created> cb) override {
    inner_->create(req, t, timed(cb));
  }
  void get(const std::string& id, millis t, callback<sandbox_view> cb) override {
    inner_->get(id, t, timed(cb));
  }
  void list(const std::string& status, uint32_t limit, uint32_t offset, millis t,
            callback<sandbox_list> cb) override {
    inner_->list(status, limit, offset, t, timed(cb));
  }
  void put_file(const std::string& id, const std::string& path, shared_bytes body, millis t,
                callback<bool> cb) override {
    inner_->put_file(id, path, std::move(body), t, timed(cb));
  }
  void get_file(const std::string& id, const std::string& path, size_t max_bytes, millis t,
                callback<std::string> cb) override {
    inner_->get_file(id, path, max_bytes, t, timed(cb));
  }
  void exec(const std::string& id, const exec_request& req, millis t,
            callback<exec_result> cb) override {
    inner_->exec(id, req, t, timed(cb));
  }
  std::shared_ptr<stream_handle> exec_stream(const std::string& id, const exec_request& req,
                                             millis t, exec_stream_callbacks cbs) override {
    cbs.on_done = timed(std::move(cbs.on_done));
    return inner_->exec_stream(id, req, t, std::move(cbs));
  }
  void get_egress(const std::string& id, millis t, callback<egress_body> cb) override {
    inner_->get_egress(id, t, timed(cb));
  }
  void put_egress(const std::string& id, const egress_policy& egress, millis t,
                  callback<egress_body> cb) override {
    inner_->put_egress(id, egress, t, timed(cb));
  }
  void pause(const std::string& id, millis t, callback<sandbox_view> cb) override {
    inner_->pause(id, t, timed(cb));
  }
  void resume(const std::string& id, millis t, callback<sandbox_view> cb) override {
    inner_->resume(id, t, timed(cb));
  }
  void remove(const std::string& id, millis t, callback<sandbox_deleted> cb) override {
    inner_->remove(id, t, timed(cb));
  }
  void remove_if_idle(const std::string& id, uint32_t idle_s, millis t,
                      callback<sandbox_deleted> cb) override {
    inner_->remove_if_idle(id, idle_s, t, timed(cb));
  }
  void stop(const std::string& id, millis t, callback<sandbox_view> cb) override {
    inner_->stop(id, t, timed(cb));
  }
  void images(millis t, callback<image_list> cb) override { inner_->images(t, timed(cb)); }
  void add_image(const image_add_request& req, millis t, callback<image_added> cb) override {
    inner_->add_image(req, t, timed(cb));
  }
  void remove_image(const std::string& name, millis t, callback<image_removed> cb) override {
    inner_->remove_image(name, t, timed(cb));
  }
  void shutdown() override { inner_->shutdown(); }

private:
  /// `cb`, recording the time from now to its call first.
  template<class T>
  callback<T> timed(callback<T> cb) {
    return [cb = std::move(cb), start = clock::now(), &latency = latency_](result<T> r) {
      latency.record(clock::now() - start);
      cb(std::move(r));
    };
  }

  std::shared_ptr<client> inner_;
  call_latency& latency_;
};

} // namespace

std::shared_ptr<client> observed(std::shared_ptr<client> inner, call_latency& latency) {
  return std::make_shared<observed_client>(std::move(inner), latency);
}

} // namespace guestflow::cp
