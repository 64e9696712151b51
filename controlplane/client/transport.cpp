#include "controlplane/client/transport.hpp"

#include "controlplane/client/http_call.hpp"

#include <boost/asio/post.hpp>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace guestflow::cp {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

result<std::shared_ptr<transport>> transport::make(endpoint ep, client_config cfg) {
  auto url = parse_base_url(ep.base_url);
  if (!url)
    return url.error();
  if (!url->tls && !is_loopback_host(url->host))
    return fail(ec::policy_refused,
                "plain http to the control plane is only allowed for loopback hosts; use "
                "https://"
                  + url->host_header);
  if (cfg.io_threads == 0)
    return fail(ec::bad_request, "client_config.io_threads must be at least 1");
  if (cfg.default_timeout.count() <= 0)
    return fail(ec::bad_request, "client_config.default_timeout must be positive");
  auto t = std::make_shared<transport>(std::move(ep), std::move(cfg), std::move(*url));
  if (t->url_.tls) {
    try {
      ssl::context ctx(ssl::context::tls_client);
      SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
      if (t->ep_.verify_tls) {
        ctx.set_verify_mode(ssl::verify_peer);
        ctx.set_default_verify_paths();
        if (!t->ep_.ca_pem.empty())
          ctx.add_certificate_authority(net::buffer(t->ep_.ca_pem));
      } else {
        spdlog::warn("control plane {}: TLS peer verification is OFF", t->url_.origin());
        ctx.set_verify_mode(ssl::verify_none);
      }
      t->tls_.emplace(std::move(ctx));
    } catch (const boost::system::system_error& e) {
      return fail(ec::unavailable, "cannot set up TLS for " + t->url_.origin() + ": " + e.what());
    }
  }
  return t;
}

transport::transport(endpoint ep, client_config cfg, base_url url)
  : ioc_(static_cast<int>(cfg.io_threads))
  , ep_(std::move(ep))
  , cfg_(std::move(cfg))
  , url_(std::move(url))
  , pool_(cfg_.max_idle_per_endpoint, cfg_.pool_idle_timeout) {}

transport::~transport() {
  // Only reached once no handler holds us: the threads have left run() already.
  for (auto& t : threads_)
    if (t.joinable())
      t.detach();
}

void transport::start() {
  std::lock_guard<std::mutex> lock(mtx_);
  work_.emplace(net::make_work_guard(ioc_));
  for (size_t i = 0; i < cfg_.io_threads; ++i) {
    threads_.emplace_back([self = shared_from_this()] {
      for (;;) {
        try {
          self->ioc_.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("control-plane client thread: {}", e.what());
        } catch (...) {
          spdlog::error("control-plane client thread: unknown exception");
        }
      }
    });
  }
}

void transport::shutdown() {
  std::vector<std::shared_ptr<http_call>> live;
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (stopping_)
      return;
    stopping_ = true;
    for (auto& [id, weak] : calls_)
      if (auto c = weak.lock())
        live.push_back(std::move(c));
    threads.swap(threads_);
  }
  for (auto& c : live)
    c->abort(fail(ec::unavailable, "control-plane client for " + url_.origin() + " shut down"));
  live.clear();
  pool_.close_all();
  {
    std::lock_guard<std::mutex> lock(mtx_);
    work_.reset();
  }
  bool inside = false;
  auto me = std::this_thread::get_id();
  for (auto& t : threads)
    inside = inside || t.get_id() == me;
  for (auto& t : threads) {
    // A thread cannot join itself, nor wait for siblings that wait for its handler.
    if (inside)
      t.detach();
    else
      t.join();
  }
}

bool transport::enroll(const std::shared_ptr<http_call>& c, uint64_t& id,
                       std::function<void()> begin) {
  std::lock_guard<std::mutex> lock(mtx_);
  if (stopping_)
    return false;
  id = next_id_++;
  calls_.emplace(id, c);
  net::post(ioc_, std::move(begin));
  return true;
}

void transport::withdraw(uint64_t id) {
  std::lock_guard<std::mutex> lock(mtx_);
  calls_.erase(id);
}

void transport::post_or_run(std::function<void()> f) {
  auto guarded = [f = std::move(f)] {
    try {
      f();
    } catch (const std::exception& e) {
      spdlog::error("control-plane client callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("control-plane client callback threw");
    }
  };
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (!stopping_) {
      net::post(ioc_, std::move(guarded));
      return;
    }
  }
  guarded();
}

std::unique_ptr<connection> transport::open_connection() {
  if (tls_)
    return std::make_unique<connection>(ioc_, *tls_, url_.host, ep_.verify_tls);
  return std::make_unique<connection>(ioc_);
}

} // namespace guestflow::cp
