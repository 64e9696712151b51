#include "controlplane/client/client.hpp"
#include "controlplane/client/endpoint_selection.hpp"
#include "controlplane/client/error_mapping.hpp"
#include "controlplane/client/exec_stream.hpp"
#include "controlplane/client/fleet_client.hpp"
#include "controlplane/client/http_call.hpp"
#include "controlplane/client/transport.hpp"
#include "controlplane/client/url.hpp"

namespace guestflow::cp {
namespace {

using boost::beast::http::verb;

constexpr std::string_view json_type = "application/json";

/// A JSend call that decodes its reply into `T`: the callback lives in the call itself (no
/// wrapping completion), and a success in the usual exact envelope form is parsed once.
template<class T>
class typed_call final : public http_call {
public:
  typed_call(std::shared_ptr<transport> t, call_spec s, callback<T> cb)
      : http_call(std::move(t), std::move(s), {})
      , cb_(std::move(cb)) {}

private:
  bool take_data(std::string_view data) override {
    auto r = decode<T>(data);
    if (!r) return false;
    value_ = std::move(*r);
    return true;
  }

  void deliver(result<std::string> r) override {
    auto cb = std::move(cb_);
    if (!r) return cb(std::move(r).error());
    if (value_) return cb(std::move(*value_));
    cb(decode_reply<T>(*r, spec().what()));
  }

  callback<T> cb_;
  std::optional<T> value_;
};

/// The client interface on top of http_call: builds each wire request, decodes each reply.
class beast_client final : public client {
public:
  explicit beast_client(std::shared_ptr<transport> t)
      : client(t->ep())
      , t_(std::move(t)) {}

  ~beast_client() override { t_->shutdown(); }

  void shapes(millis timeout, callback<shape_list> cb) override {
    call<shape_list>(spec(verb::get, "/v1/shapes", timeout), std::move(cb));
  }

  void who(millis timeout, callback<whoami> cb) override {
    call<whoami>(spec(verb::get, "/v1/whoami", timeout), std::move(cb));
  }

  void capabilities_of(millis timeout, callback<capabilities> cb) override {
    if (ep_.kind == provider::createos) // no such endpoint: the facts are known
      return t_->post_or_run([cb = std::move(cb)] { cb(createos_capabilities()); });
    call<capabilities>(spec(verb::get, "/v1/capabilities", timeout), std::move(cb));
  }

  void capacity(millis timeout, callback<node_capacity> cb) override {
    if (ep_.kind == provider::createos) return client::capacity(timeout, std::move(cb));
    call<node_capacity>(spec(verb::get, "/v1/capacity", timeout), std::move(cb));
  }

  void create(const sandbox_create_request& req, millis timeout,
              callback<sandbox_created> cb) override {
    auto s = spec(verb::post, "/v1/sandboxes", timeout);
    s.idempotent = false;
    with_json(s, encode(req));
    call<sandbox_created>(std::move(s), std::move(cb));
  }

  void get(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    if (!checked_id(id, cb)) return;
    call<sandbox_view>(spec(verb::get, sandbox(id), timeout), std::move(cb));
  }

  void list(const std::string& status, uint32_t limit, uint32_t offset, millis timeout,
            callback<sandbox_list> cb) override {
    std::string query;
    auto add = [&](std::string_view k, const std::string& v) {
      query += (query.empty() ? "?" : "&") + std::string(k) + "=" + percent_encode(v);
    };
    if (!status.empty()) add("status", status);
    if (limit > 0) add("limit", std::to_string(limit));
    if (offset > 0) add("offset", std::to_string(offset));
    call<sandbox_list>(spec(verb::get, "/v1/sandboxes" + query, timeout), std::move(cb));
  }

  void put_file(const std::string& id, const std::string& path, shared_bytes body,
                millis timeout, callback<bool> cb) override {
    if (!checked_id(id, cb) || !checked_path(path, cb)) return;
    auto s = spec(verb::put, files(id, path), timeout);
    s.content_type = "application/octet-stream";
    s.body = std::move(body);
    start(std::move(s), [cb = std::move(cb)](result<std::string> r) {
      if (!r) return cb(std::move(r).error());
      cb(true);
    });
  }

  void get_file(const std::string& id, const std::string& path, size_t max_bytes,
                millis timeout, callback<std::string> cb) override {
    if (!checked_id(id, cb) || !checked_path(path, cb)) return;
    auto s = spec(verb::get, files(id, path), timeout);
    s.kind = body_kind::raw;
    s.body_cap = max_bytes;
    s.cap_is_artifact = true;
    start(std::move(s), std::move(cb));
  }

  void exec(const std::string& id, const exec_request& req, millis timeout,
            callback<exec_result> cb) override {
    if (!checked_id(id, cb)) return;
    auto s = spec(verb::post, sandbox(id) + "/exec", timeout);
    s.idempotent = false;
    with_json(s, encode(req));
    call<exec_result>(std::move(s), std::move(cb));
  }

  std::shared_ptr<stream_handle> exec_stream(const std::string& id, const exec_request& req,
                                             millis timeout,
                                             exec_stream_callbacks cbs) override {
    if (id.empty()) {
      reject(std::move(cbs.on_done), fail(ec::bad_request, "sandbox id must not be empty"));
      return finished_stream();
    }
    auto s = spec(verb::post, sandbox(id) + "/exec?stream=true", timeout);
    s.idempotent = false;
    s.kind = body_kind::raw;
    with_json(s, encode(req));
    return start_exec_stream(t_, std::move(s), std::move(cbs));
  }

  void get_egress(const std::string& id, millis timeout, callback<egress_body> cb) override {
    if (!checked_id(id, cb)) return;
    call<egress_body>(spec(verb::get, sandbox(id) + "/egress", timeout), std::move(cb));
  }

  void put_egress(const std::string& id, const egress_policy& egress, millis timeout,
                  callback<egress_body> cb) override {
    if (!checked_id(id, cb)) return;
    auto s = spec(verb::put, sandbox(id) + "/egress", timeout);
    with_json(s, encode(egress_body{egress}));
    call<egress_body>(std::move(s), std::move(cb));
  }

  void pause(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    if (!checked_id(id, cb)) return;
    call<sandbox_view>(spec(verb::post, sandbox(id) + "/pause", timeout), std::move(cb));
  }

  void resume(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    if (!checked_id(id, cb)) return;
    call<sandbox_view>(spec(verb::post, sandbox(id) + "/resume", timeout), std::move(cb));
  }

  void remove(const std::string& id, millis timeout, callback<sandbox_deleted> cb) override {
    if (!checked_id(id, cb)) return;
    call<sandbox_deleted>(spec(verb::delete_, sandbox(id), timeout), std::move(cb));
  }

  void remove_if_idle(const std::string& id, uint32_t idle_seconds, millis timeout,
                      callback<sandbox_deleted> cb) override {
    if (ep_.kind == provider::createos) return remove(id, timeout, std::move(cb));
    if (!checked_id(id, cb)) return;
    call<sandbox_deleted>(spec(verb::delete_,
                               sandbox(id) + "?if_idle_for=" + std::to_string(idle_seconds),
                               timeout),
                          std::move(cb));
  }

  void stop(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    if (ep_.kind == provider::createos)
      return reject(std::move(cb), fail(ec::unavailable, "CreateOS has no persistent guests"));
    if (!checked_id(id, cb)) return;
    call<sandbox_view>(spec(verb::post, sandbox(id) + "/stop", timeout), std::move(cb));
  }

  void images(millis timeout, callback<image_list> cb) override {
    if (!local_images(cb)) return;
    call<image_list>(spec(verb::get, "/v1/images", timeout), std::move(cb));
  }

  void add_image(const image_add_request& req, millis timeout,
                 callback<image_added> cb) override {
    if (!local_images(cb)) return;
    auto s = spec(verb::post, "/v1/images", timeout);
    s.idempotent = false;
    with_json(s, encode(req));
    call<image_added>(std::move(s), std::move(cb));
  }

  void remove_image(const std::string& name, millis timeout,
                    callback<image_removed> cb) override {
    if (!local_images(cb)) return;
    if (name.empty())
      return reject(std::move(cb), fail(ec::bad_request, "image name must not be empty"));
    call<image_removed>(spec(verb::delete_, "/v1/images/" + percent_encode(name), timeout),
                        std::move(cb));
  }

  void shutdown() override { t_->shutdown(); }

private:
  /// Images are the local control plane's: CreateOS answers `unavailable` without a request.
  template<class T>
  bool local_images(callback<T>& cb) {
    if (ep_.kind != provider::createos) return true;
    reject(std::move(cb),
           fail(ec::unavailable,
                "guest images are managed by the local control plane; CreateOS has its own "
                "templates (name one with CREATEOS_SANDBOX_ROOTFS), so `guestflow image` does "
                "not apply to " +
                    ep_.base_url));
    return false;
  }

  /// `path` is encoded and may carry a query; messages name the call without the query.
  call_spec spec(verb method, std::string path, millis timeout) const {
    call_spec s;
    s.method = method;
    const auto& prefix = t_->url().prefix;
    s.target = prefix.empty() ? std::move(path) : prefix + path;
    s.path_at = prefix.size();
    s.timeout = timeout;
    s.body_cap = t_->cfg().max_response_bytes;
    return s;
  }

  static void with_json(call_spec& s, std::string body) {
    s.content_type = std::string(json_type);
    s.body = std::move(body);
  }

  static std::string sandbox(const std::string& id) {
    return "/v1/sandboxes/" + percent_encode(id);
  }

  static std::string files(const std::string& id, const std::string& path) {
    return sandbox(id) + "/files?path=" + percent_encode(path, /*keep_slash=*/true);
  }

  template<class T>
  bool checked_id(const std::string& id, callback<T>& cb) {
    if (!id.empty()) return true;
    reject(std::move(cb), fail(ec::bad_request, "sandbox id must not be empty"));
    return false;
  }

  template<class T>
  bool checked_path(const std::string& path, callback<T>& cb) {
    if (!path.empty() && path.front() == '/' && path.find('\0') == std::string::npos)
      return true;
    reject(std::move(cb), fail(ec::bad_request, "file path must be absolute: '" + path + "'"));
    return false;
  }

  /// Completes `cb` with `f` on a client thread, like every other outcome.
  template<class T>
  void reject(callback<T> cb, failure f) {
    t_->post_or_run([cb = std::move(cb), f = std::move(f)]() mutable { cb(std::move(f)); });
  }

  void start(call_spec s, http_call::completion done) {
    http_call::start(t_, std::move(s), std::move(done));
  }

  /// A JSend call whose `data` decodes into `T`.
  template<class T>
  void call(call_spec s, callback<T> cb) {
    http_call::launch<typed_call<T>>(t_, std::move(s), std::move(cb));
  }

  std::shared_ptr<transport> t_;
};

} // namespace

void client::images(millis, callback<image_list> cb) {
  cb(fail(ec::unavailable, "this control-plane client does not manage images"));
}

void client::add_image(const image_add_request&, millis, callback<image_added> cb) {
  cb(fail(ec::unavailable, "this control-plane client does not manage images"));
}

void client::remove_image(const std::string&, millis, callback<image_removed> cb) {
  cb(fail(ec::unavailable, "this control-plane client does not manage images"));
}

void client::remove_if_idle(const std::string&, uint32_t, millis,
                            callback<sandbox_deleted> cb) {
  cb(fail(ec::unavailable, "this control-plane client cannot delete only an idle guest"));
}

void client::stop(const std::string&, millis, callback<sandbox_view> cb) {
  cb(fail(ec::unavailable, "this control-plane client cannot stop a guest"));
}

void client::capacity(millis, callback<node_capacity> cb) {
  cb(fail(ec::unavailable, "this control-plane client does not report capacity"));
}

void client::endpoint_of(const std::string&, millis, callback<endpoint> cb) {
  cb(where());
}

result<std::shared_ptr<client>> client::make(endpoint ep, client_config cfg) {
  // A fleet (`A,B,…` or `etcd://…`, endpoint_selection.hpp) is many clients behind one.
  if (is_fleet_url(ep.base_url)) {
    auto fleet = fleet_config_of(ep, cfg);
    if (!fleet) return fleet.error();
    return make_fleet_client(std::move(*fleet));
  }
  auto t = transport::make(std::move(ep), std::move(cfg));
  if (!t) return t.error();
  auto transport = std::move(*t);
  transport->start();
  return std::shared_ptr<client>(std::make_shared<beast_client>(std::move(transport)));
}

} // namespace guestflow::cp
