#include "controlplane/client/transport.hpp"

#include "controlplane/client/tls.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <openssl/ssl.h>
#include <spdlog/spdlog.h>

namespace guestflow::cp {

namespace net = boost::asio;
namespace ssl = boost::asio::ssl;

result<std::shared_ptr<transport>> transport::make(endpoint ep, client_config cfg) {
  auto url = parse_base_url(ep.base_url);
  if (!url) return url.error();
  if (!url->tls && url->socket_path.empty() && !is_loopback_host(url->host))
    return fail(ec::policy_refused,
                "plain http to the control plane is only allowed for loopback hosts; use "
                "https://" +
                    url->host_header);
  if (cfg.io_threads == 0)
    return fail(ec::bad_request, "client_config.io_threads must be at least 1");
  if (cfg.default_timeout.count() <= 0)
    return fail(ec::bad_request, "client_config.default_timeout must be positive");
  auto t = std::make_shared<transport>(std::move(ep), std::move(cfg), std::move(*url));
  if (t->url_.tls) {
    auto ctx = tls_client_context(t->ep_, t->url_.origin());
    if (!ctx) return ctx.error();
    t->tls_.emplace(std::move(*ctx));
  }
  return t;
}

transport::transport(endpoint ep, client_config cfg, base_url url)
    : ep_(std::move(ep))
    , cfg_(std::move(cfg))
    , url_(std::move(url)) {
  for (size_t i = 0; i < cfg_.io_threads; ++i) {
    auto lane = std::make_unique<io_lane>();
    // Each lane keeps its share of the idle connections.
    auto share = (cfg_.max_idle_per_endpoint + cfg_.io_threads - 1) / cfg_.io_threads;
    lane->pool.emplace(share, cfg_.pool_idle_timeout, cfg_.pool_peek_after);
    lanes_.push_back(std::move(lane));
  }
}

transport::~transport() {
  // Only reached once no handler holds us: the threads have left run() already.
  for (auto& l : lanes_) {
    if (l->loop) l->loop->reclaim(); // unlisted: no borrower may touch the lane any more
    if (l->thread.joinable()) l->thread.detach();
  }
}

namespace {

/// Runs `f`, logging what it threw as `what` (the loop, or the caller, goes on).
template<class F>
void logging_errors(const char* what, F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    spdlog::error("{}: {}", what, e.what());
  } catch (...) {
    spdlog::error("{}: unknown exception", what);
  }
}

constexpr const char* in_handler = "control-plane client thread";

/// Runs one handler of `ioc` (blocking until one is ready); false once it has none left.
bool run_one_handler(net::io_context& ioc) {
  bool ran = true;
  logging_errors(in_handler, [&] { ran = ioc.run_one() > 0; });
  return ran;
}

/// A lane's io_context as a loop the scheduler may borrow.
class lane_loop final : public lendable_loop {
public:
  explicit lane_loop(net::io_context& ioc)
      : ioc_(ioc) {}

  bool run_one() override { return run_one_handler(ioc_); }

  void poll() override {
    logging_errors(in_handler, [&] { ioc_.poll(); });
  }

  void wake() override {
    net::post(ioc_, [] {});
  }

private:
  net::io_context& ioc_;
};

} // namespace

void transport::start() {
  std::lock_guard<std::mutex> lock(mtx_);
  for (auto& l : lanes_) {
    l->work.emplace(net::make_work_guard(l->ioc));
    if (cfg_.lend_io_to_scheduler) l->loop = std::make_shared<lane_loop>(l->ioc);
    // One handler at a time; a lent lane's thread steps aside while a scheduler runs it.
    l->thread = std::thread([self = shared_from_this(), lane = l.get()] {
      do {
        if (lane->loop) lane->loop->owner_turn();
      } while (run_one_handler(lane->ioc));
    });
    if (l->loop) lendable_loop::lend(l->loop);
  }
}

bool transport::enroll(const std::shared_ptr<inflight_call>& c, io_lane& lane) {
  std::lock_guard<std::mutex> lock(mtx_);
  if (stopping_) return false;
  c->prev_ = nullptr;
  c->next_ = calls_;
  if (calls_) calls_->prev_ = c.get();
  calls_ = c.get();
  net::post(lane.ioc, [c] { c->begin(); });
  return true;
}

void transport::withdraw(inflight_call* c) {
  std::lock_guard<std::mutex> lock(mtx_);
  if (c->prev_)
    c->prev_->next_ = c->next_;
  else if (calls_ == c)
    calls_ = c->next_;
  if (c->next_) c->next_->prev_ = c->prev_;
  c->prev_ = c->next_ = nullptr;
}

void transport::shutdown() {
  std::vector<std::shared_ptr<inflight_call>> live;
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (stopping_) return;
    stopping_ = true;
    for (auto* c = calls_; c; c = c->next_)
      if (auto s = c->hold()) live.push_back(std::move(s));
    for (auto& l : lanes_)
      threads.push_back(std::move(l->thread));
  }
  // The lanes' own threads run them again: what follows needs them running.
  bool inside = false;
  for (auto& l : lanes_)
    if (l->loop) {
      inside = inside || l->loop->borrowed_here();
      l->loop->reclaim();
    }
  for (auto& c : live)
    c->abort(fail(ec::unavailable, "control-plane client for " + url_.origin() + " shut down"));
  live.clear();
  for (auto& l : lanes_)
    l->pool->close_all();
  {
    std::lock_guard<std::mutex> lock(mtx_);
    for (auto& l : lanes_)
      l->work.reset();
  }
  auto me = std::this_thread::get_id();
  for (auto& t : threads)
    inside = inside || t.get_id() == me;
  for (auto& t : threads) {
    if (!t.joinable()) continue;
    // A thread cannot join itself, nor wait for siblings that wait for its handler (nor
    // can a scheduler worker running a lane: the lane's thread waits for it to leave).
    if (inside)
      t.detach();
    else
      t.join();
  }
}

void transport::post_or_run(std::function<void()> f) {
  auto guarded = [f = std::move(f)] {
    logging_errors("control-plane client callback threw", f);
  };
  {
    std::lock_guard<std::mutex> lock(mtx_);
    if (!stopping_) {
      net::post(pick().ioc, std::move(guarded));
      return;
    }
  }
  guarded();
}

std::unique_ptr<connection> transport::open_connection(io_lane& lane) {
  if (tls_) return std::make_unique<connection>(lane.ioc, *tls_, url_.host, ep_.verify_tls);
  return std::make_unique<connection>(lane.ioc);
}

} // namespace guestflow::cp
