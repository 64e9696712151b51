#include "controlplane/client/fleet_client.hpp"

#include "common/text.hpp"
#include "controlplane/client/url.hpp"
#include "fleet/etcd_client.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <thread>
#include <unistd.h>
#include <unordered_map>

namespace guestflow::cp {
namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

/// Names of reusable guests (actors/guest_names: `gf-c-…`): the only names claimed
/// fleet-wide. Ephemeral names are random per run and need no claim.
constexpr std::string_view reusable_prefix = "gf-c-";
/// Timed-out capacity probes in a row after which a node counts as gone (one refused
/// connection is enough).
constexpr int misses_until_gone = 3;
constexpr uint32_t list_page = 100;

/// The fleet's warnings go to stderr: a CLI's stdout is the guest program's output only
/// (spdlog's default logger writes to stdout).
spdlog::logger& fleet_log() {
  static const std::shared_ptr<spdlog::logger> log = [] {
    auto l = spdlog::get("guestflow-fleet");
    return l ? l : spdlog::stderr_color_mt("guestflow-fleet");
  }();
  return *log;
}

bool reusable(const std::optional<std::string>& name) {
  return name && name->compare(0, reusable_prefix.size(), reusable_prefix) == 0;
}

/// Memory of a shape from its name when no node told us (`s-1vcpu-256mb`, `s-2vcpu-4gb`).
uint64_t mib_from_shape_name(std::string_view shape) {
  auto dash = shape.rfind('-');
  if (dash == std::string_view::npos) return 0;
  auto tail = lower(shape.substr(dash + 1));
  uint64_t unit = 0;
  if (tail.size() > 2 && tail.compare(tail.size() - 2, 2, "mb") == 0) unit = 1;
  if (tail.size() > 2 && tail.compare(tail.size() - 2, 2, "gb") == 0) unit = 1024;
  if (unit == 0) return 0;
  uint64_t n = 0;
  for (size_t i = 0; i + 2 < tail.size(); ++i) {
    if (tail[i] < '0' || tail[i] > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(tail[i] - '0');
  }
  return n * unit;
}

/// Rendezvous hash of (name, node): every runtime ranks the nodes the same way for a name,
/// so racing creates of one name head for the same node even without etcd.
uint64_t rendezvous(std::string_view name, std::string_view node) {
  uint64_t h = 1469598103934665603ull;
  for (auto s : {name, std::string_view{"\0", 1}, node})
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  return h;
}

/// Completes a callback at most once: the node's own answer, or an abort when the node is
/// declared gone — whichever comes first.
template<class T>
struct once {
  std::atomic<bool> done{false};
  callback<T> cb;
  bool fire(result<T> r) {
    if (done.exchange(true)) return false;
    auto c = std::move(cb);
    c(std::move(r));
    return true;
  }
};

struct node_state {
  std::string name;
  std::string url;
  std::shared_ptr<client> api;
  /// Asks "is it there right now?": one attempt on a fresh connection, no retries (a retry
  /// could reach the node restarted meanwhile, which says nothing of the call it lost).
  std::shared_ptr<client> probe;
  node_capacity cap;           ///< as last reported
  bool reachable = false;      ///< static: its last probe answered; etcd: its record exists
  int misses = 0;              ///< timed-out probes in a row
  int64_t record_revision = 0; ///< etcd: the mod_revision of the record `cap` came from
  /// etcd: the record's revision when a call found the node gone. It stays gone until the
  /// record changes (a live node puts it again every TTL/3) or leaves with its lease.
  int64_t gone_revision = -1;
  uint64_t inflight_mib = 0, inflight_guests = 0; ///< creates on their way to it
  uint64_t since_mib = 0, since_guests = 0;       ///< creates done since its last report
  uint64_t placed = 0;
  uint64_t next_call = 0;
  /// Aborts of its calls in flight, run when it is declared gone.
  std::unordered_map<uint64_t, std::function<void(const failure&)>> inflight;

  uint64_t committed() const { return cap.memory_committed_mib + inflight_mib + since_mib; }
  uint64_t guests() const { return cap.guests + inflight_guests + since_guests; }
  bool has_room(uint64_t mib) const {
    if (cap.max_guests != 0 && guests() >= cap.max_guests) return false;
    return committed() + mib <= cap.memory_budget_mib;
  }
};

/// The fleet's state, threads and calls; only a fleet_client (below) owns it from outside,
/// and its destructor shuts this down, so no thread of this one ever ends it.
class fleet_core final : public client, public std::enable_shared_from_this<fleet_core> {
public:
  fleet_core(endpoint ep, fleet_config cfg, std::shared_ptr<fleet::etcd_client> etcd)
      : client(std::move(ep))
      , cfg_(std::move(cfg))
      , etcd_(std::move(etcd))
      , rng_(std::random_device{}()) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    claimant_ = std::string{host} + "-" + std::to_string(::getpid()) + "-" +
                std::to_string(rng_() % 1'000'000);
  }

  ~fleet_core() override { shutdown(); }

  /// Reads the nodes once (so the first create has a table), then keeps them current.
  void start() {
    for (auto& url : cfg_.urls)
      node_for_url(url, url);
    refresh_once();
    // Each thread keeps the core alive until shutdown ends it (fleet_client's destructor
    // shuts down): the core is never destroyed on a thread of its own.
    refresher_ = std::thread([keep = shared_from_this()] { keep->refresh_loop(); });
    worker_ = std::thread([keep = shared_from_this()] { keep->work_loop(); });
  }

  fleet_snapshot snapshot() const {
    std::lock_guard lk{mu_};
    fleet_snapshot s;
    s.failures = failures_;
    for (auto& [name, n] : nodes_) {
      fleet_node_view v;
      v.node = name;
      v.url = n->url;
      v.reachable = n->reachable;
      v.capacity = n->cap;
      v.capacity.memory_committed_mib = n->committed();
      v.capacity.guests = n->guests();
      v.placed = n->placed;
      s.nodes.push_back(std::move(v));
    }
    return s;
  }

  // -- calls that any node answers -------------------------------------------------------

  void shapes(millis timeout, callback<shape_list> cb) override {
    any_node<shape_list>(timeout, std::move(cb),
                         [](client& c, millis t, auto k) { c.shapes(t, std::move(k)); });
  }
  void who(millis timeout, callback<whoami> cb) override {
    any_node<whoami>(timeout, std::move(cb),
                     [](client& c, millis t, auto k) { c.who(t, std::move(k)); });
  }
  void capabilities_of(millis timeout, callback<capabilities> cb) override {
    any_node<capabilities>(timeout, std::move(cb), [](client& c, millis t, auto k) {
      c.capabilities_of(t, std::move(k));
    });
  }
  void capacity(millis timeout, callback<node_capacity> cb) override {
    any_node<node_capacity>(timeout, std::move(cb),
                            [](client& c, millis t, auto k) { c.capacity(t, std::move(k)); });
  }

  // -- placement ---------------------------------------------------------------------------

  void create(const sandbox_create_request& req, millis timeout,
              callback<sandbox_created> cb) override {
    if (stopped_) return cb(fail(ec::unavailable, "fleet client is shut down"));
    auto deadline =
        clock::now() + (timeout > millis::zero() ? timeout : cfg_.node.default_timeout);
    if (etcd_ && reusable(req.name)) {
      // The claim's etcd calls block: they run on the worker, never on the caller's thread.
      auto self = shared_from_this();
      post([self, req, deadline, cb = std::move(cb)]() mutable {
        self->claim_then_create(std::move(req), deadline, std::move(cb));
      });
      return;
    }
    place(req, deadline, {}, std::move(cb));
  }

  // -- calls by id -------------------------------------------------------------------------

  /// The node that holds `id`: its own client's endpoint (URL and the fleet's key).
  void endpoint_of(const std::string& id, millis timeout, callback<endpoint> cb) override {
    by_id<endpoint>(id, timeout, std::move(cb),
                    [id](client& c, millis t, auto k) { c.endpoint_of(id, t, std::move(k)); });
  }

  void get(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    by_id<sandbox_view>(id, timeout, std::move(cb),
                        [id](client& c, millis t, auto k) { c.get(id, t, std::move(k)); });
  }
  void put_file(const std::string& id, const std::string& path, shared_bytes body,
                millis timeout, callback<bool> cb) override {
    by_id<bool>(id, timeout, std::move(cb), [id, path, body](client& c, millis t, auto k) {
      c.put_file(id, path, body, t, std::move(k));
    });
  }
  void get_file(const std::string& id, const std::string& path, size_t max_bytes,
                millis timeout, callback<std::string> cb) override {
    by_id<std::string>(id, timeout, std::move(cb),
                       [id, path, max_bytes](client& c, millis t, auto k) {
                         c.get_file(id, path, max_bytes, t, std::move(k));
                       });
  }
  void exec(const std::string& id, const exec_request& req, millis timeout,
            callback<exec_result> cb) override {
    by_id<exec_result>(id, timeout, std::move(cb), [id, req](client& c, millis t, auto k) {
      c.exec(id, req, t, std::move(k));
    });
  }
  void get_egress(const std::string& id, millis timeout, callback<egress_body> cb) override {
    by_id<egress_body>(id, timeout, std::move(cb), [id](client& c, millis t, auto k) {
      c.get_egress(id, t, std::move(k));
    });
  }
  void put_egress(const std::string& id, const egress_policy& egress, millis timeout,
                  callback<egress_body> cb) override {
    by_id<egress_body>(id, timeout, std::move(cb), [id, egress](client& c, millis t, auto k) {
      c.put_egress(id, egress, t, std::move(k));
    });
  }
  void pause(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    by_id<sandbox_view>(id, timeout, std::move(cb),
                        [id](client& c, millis t, auto k) { c.pause(id, t, std::move(k)); });
  }
  void resume(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    by_id<sandbox_view>(id, timeout, std::move(cb),
                        [id](client& c, millis t, auto k) { c.resume(id, t, std::move(k)); });
  }
  void remove(const std::string& id, millis timeout, callback<sandbox_deleted> cb) override {
    auto self = shared_from_this();
    by_id<sandbox_deleted>(
        id, timeout,
        [self, id, cb = std::move(cb)](result<sandbox_deleted> r) mutable {
          self->forget_deleted(id, std::move(r), std::move(cb));
        },
        [id](client& c, millis t, auto k) { c.remove(id, t, std::move(k)); });
  }
  /// On the guest's node (client::stop).
  void stop(const std::string& id, millis timeout, callback<sandbox_view> cb) override {
    by_id<sandbox_view>(id, timeout, std::move(cb),
                        [id](client& c, millis t, auto k) { c.stop(id, t, std::move(k)); });
  }
  /// remove(), guarded on the guest's node (client::remove_if_idle); a refusal keeps the
  /// name's claim.
  void remove_if_idle(const std::string& id, uint32_t idle_s, millis timeout,
                      callback<sandbox_deleted> cb) override {
    auto self = shared_from_this();
    by_id<sandbox_deleted>(
        id, timeout,
        [self, id, cb = std::move(cb)](result<sandbox_deleted> r) mutable {
          self->forget_deleted(id, std::move(r), std::move(cb));
        },
        [id, idle_s](client& c, millis t, auto k) {
          c.remove_if_idle(id, idle_s, t, std::move(k));
        });
  }

  /// A delete's answer: a guest gone (deleted, or unknown to its node) is forgotten and its
  /// name's claim released before the caller hears of it (a create of the same name that
  /// follows the answer must not have its fresh claim erased); a refusal keeps both.
  void forget_deleted(const std::string& id, result<sandbox_deleted> r,
                      callback<sandbox_deleted> cb) {
    if (!r && r.error().code != ec::not_found) return cb(std::move(r));
    std::string name, node;
    {
      std::lock_guard lk{mu_};
      if (auto i = name_of_id_.find(id); i != name_of_id_.end()) name = i->second;
      if (auto i = node_of_id_.find(id); i != node_of_id_.end()) node = i->second;
      name_of_id_.erase(id);
      node_of_id_.erase(id);
    }
    if (!etcd_ || name.empty()) return cb(std::move(r));
    post([self = shared_from_this(), name, node, r = std::move(r),
          cb = std::move(cb)]() mutable {
      self->release_claim(name, node);
      cb(std::move(r));
    });
  }

  std::shared_ptr<stream_handle> exec_stream(const std::string& id, const exec_request& req,
                                             millis timeout,
                                             exec_stream_callbacks cbs) override;

  void list(const std::string& status, uint32_t limit, uint32_t offset, millis timeout,
            callback<sandbox_list> cb) override;

  void shutdown() override {
    {
      std::lock_guard lk{mu_};
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    for (auto* t : {&refresher_, &worker_}) {
      if (!t->joinable()) continue;
      if (t->get_id() == std::this_thread::get_id())
        t->detach(); // shut down from its own task: it ends after this one
      else
        t->join();
    }
    std::vector<std::shared_ptr<node_state>> all;
    {
      std::lock_guard lk{mu_};
      for (auto& [_, n] : nodes_)
        all.push_back(n);
    }
    for (auto& n : all) {
      if (n->api) n->api->shutdown();
      if (n->probe) n->probe->shutdown();
    }
  }

private:
  // -- node table --------------------------------------------------------------------------

  /// The node called `name` at `url` (made on first sight; a new URL gets a new client).
  std::shared_ptr<node_state> node_for_url(const std::string& name, const std::string& url) {
    std::shared_ptr<client> old;
    std::shared_ptr<node_state> n;
    {
      std::lock_guard lk{mu_};
      auto& slot = nodes_[name];
      if (!slot) {
        slot = std::make_shared<node_state>();
        slot->name = name;
      }
      n = slot;
      if (n->api && n->url == url) return n;
    }
    endpoint ep;
    ep.base_url = url;
    ep.api_key = cfg_.api_key;
    ep.kind = provider::local;
    auto made = client::make(ep, cfg_.node);
    auto probe_cfg = cfg_.node;
    probe_cfg.retry_initial = probe_cfg.retry_max = cfg_.probe_timeout * 2 + 1s;
    probe_cfg.max_idle_per_endpoint = 0; // a pooled connection may predate a restart
    auto probe = made ? client::make(ep, probe_cfg) : made;
    std::lock_guard lk{mu_};
    if (!made || !probe) {
      fleet_log().warn("fleet: node {} at {} cannot be used: {}", name, url,
                       (made ? probe : made).error().message);
      return n;
    }
    old = std::move(n->api);
    if (n->probe) retired_.push_back(std::move(n->probe));
    n->api = std::move(*made);
    n->probe = std::move(*probe);
    n->url = url;
    if (old) retired_.push_back(std::move(old)); // its calls in flight finish on their own
    return n;
  }

  std::shared_ptr<node_state> node_named(const std::string& name) const {
    std::lock_guard lk{mu_};
    auto i = nodes_.find(name);
    return i == nodes_.end() ? nullptr : i->second;
  }

  /// Marks `n` gone and fails every call in flight on it with `unavailable` (outside the
  /// lock: a callback may call back into this client).
  void declare_gone(const std::shared_ptr<node_state>& n, const std::string& why) {
    std::vector<std::function<void(const failure&)>> aborts;
    {
      std::lock_guard lk{mu_};
      bool was = n->reachable;
      n->reachable = false;
      if (etcd_) n->gone_revision = n->record_revision;
      for (auto& [_, a] : n->inflight)
        aborts.push_back(std::move(a));
      n->inflight.clear();
      if (was) fleet_log().warn("fleet: control plane node {} is gone: {}", n->name, why);
    }
    auto f = fail(ec::unavailable,
                  "control plane node " + n->name + " (" + n->url + ") is gone: " + why);
    for (auto& a : aborts)
      a(f);
  }

  void refresh_loop() {
    std::unique_lock lk{mu_};
    while (!stopped_) {
      cv_.wait_for(lk, cfg_.refresh, [this] { return stopped_.load(); });
      if (stopped_) break;
      lk.unlock();
      refresh_once();
      lk.lock();
    }
  }

  void refresh_once() {
    if (etcd_)
      refresh_from_etcd();
    else
      refresh_by_probing();
    learn_shapes();
  }

  void refresh_from_etcd() {
    auto records = etcd_->range(fleet_nodes_prefix, cfg_.probe_timeout);
    if (!records) { // etcd away: keep the last table rather than forget every node
      fleet_log().warn("fleet: cannot read nodes from {}: {}", etcd_->url(),
                       records.error().message);
      return;
    }
    std::map<std::string, std::pair<node_capacity, int64_t>> seen; // record, its revision
    for (auto& kv : *records) {
      auto rec = decode<node_capacity>(kv.value);
      if (!rec || rec->url.empty()) continue;
      auto name = kv.key.substr(fleet_nodes_prefix.size());
      seen[name] = {std::move(*rec), kv.mod_revision};
    }
    for (auto& [name, rec] : seen) {
      auto n = node_for_url(name, rec.first.url);
      std::lock_guard lk{mu_};
      if (rec.second == n->gone_revision) continue; // not answering since this record
      n->gone_revision = -1;
      n->reachable = n->api != nullptr;
      n->misses = 0;
      // Only a new record counts what this client placed since: an unchanged one does not.
      if (rec.second == n->record_revision) continue;
      n->record_revision = rec.second;
      n->cap = rec.first;
      n->since_mib = n->since_guests = 0;
    }
    std::vector<std::shared_ptr<node_state>> lost;
    {
      std::lock_guard lk{mu_};
      for (auto& [name, n] : nodes_)
        if (!seen.count(name) && n->reachable) lost.push_back(n);
    }
    for (auto& n : lost)
      declare_gone(n, "its record left etcd (lease expired or revoked)");
  }

  void refresh_by_probing() {
    std::vector<std::shared_ptr<node_state>> all;
    {
      std::lock_guard lk{mu_};
      for (auto& [_, n] : nodes_)
        all.push_back(n);
    }
    struct probe {
      std::mutex mu;
      std::condition_variable cv;
      size_t left;
    };
    auto p = std::make_shared<probe>();
    p->left = all.size();
    auto self = shared_from_this();
    for (auto& n : all) {
      if (!n->api) {
        std::lock_guard lk{p->mu};
        --p->left;
        continue;
      }
      n->probe->capacity(cfg_.probe_timeout, [self, n, p](result<node_capacity> r) {
        self->take_probe(n, std::move(r));
        std::lock_guard lk{p->mu};
        if (--p->left == 0) p->cv.notify_all();
      });
    }
    std::unique_lock lk{p->mu};
    p->cv.wait_for(lk, cfg_.probe_timeout + 1s, [&] { return p->left == 0; });
  }

  void take_probe(const std::shared_ptr<node_state>& n, result<node_capacity> r) {
    if (r) {
      std::lock_guard lk{mu_};
      n->cap = std::move(*r);
      n->reachable = true;
      n->misses = 0;
      n->since_mib = n->since_guests = 0;
      return;
    }
    bool gone = false;
    {
      std::lock_guard lk{mu_};
      gone = r.error().code != ec::transient || ++n->misses >= misses_until_gone;
    }
    if (gone) declare_gone(n, r.error().message);
  }

  /// Shape memory from a node's catalog, once.
  void learn_shapes() {
    {
      std::lock_guard lk{mu_};
      if (!shape_mib_.empty()) return;
    }
    auto n = pick_any();
    if (!n) return;
    auto self = shared_from_this();
    n->api->shapes(cfg_.probe_timeout, [self](result<shape_list> r) {
      if (!r) return;
      std::lock_guard lk{self->mu_};
      for (auto& s : r->data)
        self->shape_mib_[s.id] = s.mem_mib;
    });
  }

  uint64_t shape_mib(const std::string& shape) const {
    std::lock_guard lk{mu_};
    if (auto i = shape_mib_.find(shape); i != shape_mib_.end()) return i->second;
    return mib_from_shape_name(shape);
  }

  std::shared_ptr<node_state> pick_any() const {
    std::lock_guard lk{mu_};
    for (auto& [_, n] : nodes_)
      if (n->reachable && n->api) return n;
    for (auto& [_, n] : nodes_)
      if (n->api) return n;
    return nullptr;
  }

  // -- the worker (blocking etcd calls) ------------------------------------------------------

  void post(std::function<void()> task) {
    {
      std::lock_guard lk{mu_};
      if (!stopped_) {
        tasks_.push_back(std::move(task));
        cv_.notify_all();
        return;
      }
    }
    task(); // shut down: run it here (its calls fail fast)
  }

  void work_loop() {
    std::unique_lock lk{mu_};
    for (;;) {
      cv_.wait(lk, [this] { return stopped_.load() || !tasks_.empty(); });
      if (tasks_.empty()) return; // stopped and drained
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lk.unlock();
      task();
      lk.lock();
    }
  }

  // -- placement ---------------------------------------------------------------------------

  /// The nodes with room for `mib`, in placement order; `why` counts the others.
  std::vector<std::shared_ptr<node_state>>
  candidates(uint64_t mib, const std::optional<std::string>& name, std::string& why) {
    std::lock_guard lk{mu_};
    std::vector<std::shared_ptr<node_state>> ok;
    size_t full = 0, draining = 0, down = 0;
    for (auto& [_, n] : nodes_) {
      if (!n->reachable || !n->api || !n->cap.ready)
        ++down;
      else if (n->cap.draining)
        ++draining;
      else if (!n->has_room(mib))
        ++full;
      else
        ok.push_back(n);
    }
    if (reusable(name)) {
      // Every runtime ranks the nodes alike for a name: racing creates meet on one node.
      std::sort(ok.begin(), ok.end(), [&](auto& a, auto& b) {
        return rendezvous(*name, a->name) > rendezvous(*name, b->name);
      });
    } else {
      std::shuffle(ok.begin(), ok.end(), rng_); // ties broken at random (stable sort below)
      std::stable_sort(ok.begin(), ok.end(),
                       [](auto& a, auto& b) { return a->committed() < b->committed(); });
    }
    why = std::to_string(nodes_.size()) + (nodes_.size() == 1 ? " node" : " nodes");
    if (full) why += ", " + std::to_string(full) + " full";
    if (draining) why += ", " + std::to_string(draining) + " draining";
    if (down) why += ", " + std::to_string(down) + " unreachable or not ready";
    if (ok.empty()) {
      if (nodes_.empty())
        ++failures_.no_nodes;
      else
        ++failures_.no_room;
    }
    return ok;
  }

  /// Creates on the first candidate that takes it; `on_node` (claimed names) pins a node.
  void place(const sandbox_create_request& req, clock::time_point deadline,
             const std::string& on_node, callback<sandbox_created> cb) {
    auto mib = shape_mib(req.shape);
    std::string why;
    auto order = candidates(mib, req.name, why);
    if (!on_node.empty()) {
      auto keep =
          std::find_if(order.begin(), order.end(), [&](auto& n) { return n->name == on_node; });
      if (keep == order.end())
        order.clear();
      else
        order = {*keep};
    }
    if (order.empty())
      return cb(fail(ec::capacity, "no control plane has room for " + req.shape + ": " + why));
    try_place(std::make_shared<sandbox_create_request>(req), mib, std::move(order), 0, deadline,
              why, std::move(cb));
  }

  void try_place(std::shared_ptr<sandbox_create_request> req, uint64_t mib,
                 std::vector<std::shared_ptr<node_state>> order, size_t at,
                 clock::time_point deadline, std::string why, callback<sandbox_created> cb) {
    auto left = std::chrono::duration_cast<millis>(deadline - clock::now());
    if (at >= order.size() || left <= millis::zero())
      return cb(fail(ec::capacity, "no control plane has room for " + req->shape + ": " + why +
                                       "; every node tried refused"));
    auto n = order[at];
    {
      std::lock_guard lk{mu_};
      n->inflight_mib += mib;
      ++n->inflight_guests;
    }
    auto self = shared_from_this();
    n->api->create(*req, left,
                   [self, req, mib, order = std::move(order), at, deadline, why, n,
                    cb = std::move(cb)](result<sandbox_created> r) mutable {
                     {
                       std::lock_guard lk{self->mu_};
                       n->inflight_mib -= mib;
                       --n->inflight_guests;
                       if (r) {
                         n->since_mib += mib;
                         ++n->since_guests;
                         ++n->placed;
                         self->node_of_id_[r->id] = n->name;
                         if (reusable(req->name)) self->name_of_id_[r->id] = *req->name;
                       } else if (r.error().code == ec::capacity) {
                         ++self->failures_.refused;
                       } else if (r.error().code == ec::unavailable) {
                         ++self->failures_.unreachable;
                       }
                     }
                     if (r) return cb(std::move(r));
                     // A refusal or an unreachable node built nothing: the next node may take
                     // it. Anything else (a timeout mid-create) may have built a guest: no
                     // second one elsewhere.
                     auto code = r.error().code;
                     if (code == ec::capacity || code == ec::unavailable) {
                       if (code == ec::unavailable) self->declare_gone(n, r.error().message);
                       return self->try_place(std::move(req), mib, std::move(order), at + 1,
                                              deadline, why, std::move(cb));
                     }
                     if (code == ec::transient && !self->stopped_) {
                       // A create cut off (reset by peer, no answer): a node that is not
                       // there now died under it, which is `unavailable` (the guest, if
                       // built, is on that node: the caller's reaper watches its name).
                       auto f = r.error();
                       return n->probe->capacity(
                           self->cfg_.probe_timeout,
                           [self, n, f = std::move(f),
                            cb = std::move(cb)](result<node_capacity> p) mutable {
                             if (p) return cb(std::move(f));
                             self->declare_gone(n, p.error().message);
                             cb(fail(ec::unavailable, "control plane node " + n->name +
                                                          " is gone: " + f.message));
                           });
                     }
                     cb(std::move(r));
                   });
  }

  // -- reusable names ----------------------------------------------------------------------

  static std::string claim_key(const std::string& name) {
    return std::string{fleet_names_prefix} + name;
  }

  /// On the worker: claims the name in etcd for the first node placement would choose, then
  /// creates there; a name claimed by someone else is waited for on its node.
  void claim_then_create(sandbox_create_request req, clock::time_point deadline,
                         callback<sandbox_created> cb) {
    auto mib = shape_mib(req.shape);
    bool took_over = false;
    for (;;) {
      std::string why;
      auto order = candidates(mib, req.name, why);
      auto key = claim_key(*req.name);
      // A claim names the node first in line; were it full, the create fails with capacity
      // and the claim is released (another runtime then tries its own first choice).
      if (order.empty())
        return cb(
            fail(ec::capacity, "no control plane has room for " + req.shape + ": " + why));
      auto value = encode(name_claim{order.front()->name, claimant_});
      auto claimed = etcd_->create_if_absent(key, value, 0, cfg_.probe_timeout);
      if (!claimed)
        return cb(fail(ec::unavailable, "cannot claim guest name " + *req.name + " in " +
                                            etcd_->url() + ": " + claimed.error().message));
      if (claimed->created) {
        auto self = shared_from_this();
        return place(req, deadline, order.front()->name,
                     [self, key, value, cb = std::move(cb)](result<sandbox_created> r) mutable {
                       if (r) return cb(std::move(r));
                       // Nothing was built under the claim: let it go, on the worker.
                       self->post(
                           [self, key, value, r = std::move(r), cb = std::move(cb)]() mutable {
                             self->etcd_->erase_if_value(key, value, self->cfg_.probe_timeout);
                             cb(std::move(r));
                           });
                     });
      }
      // Someone else holds it: wait for their guest to show on their node, then answer
      // "taken" so that the caller's lookup by name adopts it.
      auto holder = decode<name_claim>(claimed->current.value);
      auto holder_node = holder ? holder->node : std::string{};
      auto outcome = wait_for_holder(*req.name, holder_node, key, claimed->current, deadline);
      if (outcome == holder_wait::appeared)
        return cb(fail(ec::bad_request, "name " + *req.name +
                                            " is taken (on control plane node " + holder_node +
                                            ")"));
      if (outcome == holder_wait::released) continue;
      if (outcome == holder_wait::stale && !took_over) {
        // The holder never built it (it crashed between claim and create): take it over.
        took_over = true;
        etcd_->erase_if_value(key, claimed->current.value, cfg_.probe_timeout);
        continue;
      }
      return cb(fail(ec::unavailable, "guest name " + *req.name + " is claimed by " +
                                          (holder ? holder->owner : std::string{"?"}) +
                                          " on node " + holder_node +
                                          ", whose guest did not appear"));
    }
  }

  enum class holder_wait { appeared, released, stale, timed_out };

  holder_wait wait_for_holder(const std::string& name, const std::string& node,
                              const std::string& key, const etcd::key_value& seen,
                              clock::time_point deadline) {
    auto until = std::min(deadline, clock::now() + cfg_.claim_wait);
    while (clock::now() < until && !stopped_) {
      if (auto n = node_named(node); n && n->api && find_on_node(n, name))
        return holder_wait::appeared;
      auto now = etcd_->get(key, cfg_.probe_timeout);
      if (now && (!now->has_value() || (*now)->mod_revision != seen.mod_revision))
        return holder_wait::released;
      // The holder's node lost (its lease expired, its record gone): the claim is stale
      // now, not after claim_wait (a persistent guest's owner went with the same lease).
      if (!node.empty())
        if (auto rec = etcd_->get(std::string{fleet_nodes_prefix} + node, cfg_.probe_timeout);
            rec && !rec->has_value())
          return holder_wait::stale;
      std::unique_lock lk{mu_};
      cv_.wait_for(lk, 200ms, [this] { return stopped_.load(); });
    }
    return clock::now() < deadline ? holder_wait::stale : holder_wait::timed_out;
  }

  /// Blocking (worker only): is a live guest called `name` on `n`?
  bool find_on_node(const std::shared_ptr<node_state>& n, const std::string& name) {
    auto p = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
    auto found = std::make_shared<std::optional<bool>>();
    list_node(n, "", cfg_.probe_timeout, {}, [p, found, name](result<sandbox_list> r) {
      bool hit = false;
      if (r)
        for (auto& v : r->data)
          if (v.name == name && v.status != sandbox_status::destroyed &&
              v.status != sandbox_status::destroying)
            hit = true;
      std::lock_guard lk{p->first};
      *found = hit;
      p->second.notify_all();
    });
    std::unique_lock lk{p->first};
    p->second.wait_for(lk, cfg_.probe_timeout + 1s, [&] { return found->has_value(); });
    return found->value_or(false);
  }

  /// On the worker, after the guest is gone: its name's claim goes, if it names the node
  /// the guest was on (a later claim elsewhere is someone else's).
  void release_claim(const std::string& name, const std::string& node) {
    auto key = claim_key(name);
    auto now = etcd_->get(key, cfg_.probe_timeout);
    if (!now || !now->has_value()) return;
    auto claim = decode<name_claim>((*now)->value);
    if (claim && !node.empty() && claim->node != node) return;
    etcd_->erase_if_value(key, (*now)->value, cfg_.probe_timeout);
  }

  // -- routing by id -----------------------------------------------------------------------

  /// Runs `call` on the node that holds `id` (looked up on every node when unknown), with
  /// the callback guarded so that the node's loss fails it at once.
  template<class T, class Call>
  void by_id(const std::string& id, millis timeout, callback<T> cb, Call call) {
    std::string node;
    {
      std::lock_guard lk{mu_};
      if (auto i = node_of_id_.find(id); i != node_of_id_.end()) node = i->second;
    }
    if (!node.empty()) {
      auto n = node_named(node);
      if (n && n->api) return guarded<T>(n, timeout, std::move(cb), std::move(call));
    }
    auto self = shared_from_this();
    locate(id, timeout,
           [self, timeout, cb = std::move(cb),
            call = std::move(call)](result<std::shared_ptr<node_state>> where) mutable {
             if (!where) return cb(std::move(where).error());
             self->guarded<T>(*where, timeout, std::move(cb), std::move(call));
           });
  }

  template<class T, class Call>
  void guarded(const std::shared_ptr<node_state>& n, millis timeout, callback<T> cb,
               Call call) {
    auto o = std::make_shared<once<T>>();
    o->cb = std::move(cb);
    uint64_t key = 0;
    bool up = false;
    {
      std::lock_guard lk{mu_};
      up = n->reachable;
      key = ++n->next_call;
      if (up) n->inflight.emplace(key, [o](const failure& f) { o->fire(f); });
    }
    if (!up) {
      // Gone: fail fast rather than wait out a connect to a dead address. Its address is
      // kept: a retry once it is back (the next refresh sees it) goes through.
      o->fire(fail(ec::unavailable,
                   "control plane node " + n->name + " (" + n->url + ") is unavailable"));
      return;
    }
    auto self = shared_from_this();
    call(*n->api, timeout, [self, n, key, o](result<T> r) mutable {
      {
        std::lock_guard lk{self->mu_};
        n->inflight.erase(key);
      }
      if (!r && (r.error().code == ec::transient || r.error().code == ec::unavailable) &&
          !self->stopped_) {
        // Did the node die under the call? Ask it once, without retrying: a node that does
        // not answer now lost the call (unavailable); one that answers leaves it transient.
        auto f = r.error();
        n->probe->capacity(self->cfg_.probe_timeout,
                           [self, n, o, f = std::move(f)](result<node_capacity> p) mutable {
                             if (p) return void(o->fire(std::move(f)));
                             self->declare_gone(n, p.error().message);
                             o->fire(fail(ec::unavailable, "control plane node " + n->name +
                                                               " is gone: " + f.message));
                           });
        return;
      }
      o->fire(std::move(r));
    });
  }

  /// Finds the node holding `id`: asks every node (a runtime that restarted has no map).
  void locate(const std::string& id, millis timeout,
              std::function<void(result<std::shared_ptr<node_state>>)> done) {
    std::vector<std::shared_ptr<node_state>> all;
    {
      std::lock_guard lk{mu_};
      for (auto& [_, n] : nodes_)
        if (n->api) all.push_back(n);
    }
    if (all.empty()) return done(fail(ec::unavailable, "no control plane node is known"));
    struct search {
      std::mutex mu;
      size_t left;
      bool answered = false;
      std::string unreachable;
      std::function<void(result<std::shared_ptr<node_state>>)> done;
    };
    auto s = std::make_shared<search>();
    s->left = all.size();
    s->done = std::move(done);
    auto self = shared_from_this();
    auto probe =
        std::min(timeout > millis::zero() ? timeout : cfg_.probe_timeout, cfg_.probe_timeout);
    for (auto& n : all)
      n->api->get(id, probe, [self, s, n, id](result<sandbox_view> r) {
        std::function<void(result<std::shared_ptr<node_state>>)> fire;
        result<std::shared_ptr<node_state>> out = n;
        {
          std::lock_guard lk{s->mu};
          --s->left;
          if (s->answered) return;
          if (r) {
            s->answered = true;
            fire = std::move(s->done);
          } else {
            if (r.error().code != ec::not_found) s->unreachable += " " + n->name;
            if (s->left == 0) {
              s->answered = true;
              fire = std::move(s->done);
              out = s->unreachable.empty()
                        ? fail(ec::not_found, "no control plane node has guest " + id)
                        : fail(ec::unavailable, "guest " + id +
                                                    " is on no node that answered; not "
                                                    "reachable:" +
                                                    s->unreachable);
            }
          }
        }
        if (r) {
          std::lock_guard lk{self->mu_};
          self->node_of_id_[id] = n->name;
          if (r->name.compare(0, reusable_prefix.size(), reusable_prefix) == 0)
            self->name_of_id_[id] = r->name;
        }
        if (fire) fire(std::move(out));
      });
  }

  // -- list ----------------------------------------------------------------------------------

  /// Every page of one node's list.
  void list_node(const std::shared_ptr<node_state>& n, const std::string& status,
                 millis timeout, sandbox_list acc, callback<sandbox_list> cb) {
    auto offset = static_cast<uint32_t>(acc.data.size());
    auto self = shared_from_this();
    n->api->list(status, list_page, offset, timeout,
                 [self, n, status, timeout, acc = std::move(acc),
                  cb = std::move(cb)](result<sandbox_list> r) mutable {
                   if (!r) return cb(std::move(r).error());
                   auto got = r->data.size();
                   for (auto& v : r->data)
                     acc.data.push_back(std::move(v));
                   acc.total = r->total;
                   if (got < list_page || acc.data.size() >= acc.total)
                     return cb(std::move(acc));
                   self->list_node(n, status, timeout, std::move(acc), std::move(cb));
                 });
  }

  template<class T, class Call>
  void any_node(millis timeout, callback<T> cb, Call call) {
    auto n = pick_any();
    if (!n) return cb(fail(ec::unavailable, "no control plane node is reachable"));
    call(*n->api, timeout, std::move(cb));
  }

  fleet_config cfg_;
  std::shared_ptr<fleet::etcd_client> etcd_;
  std::string claimant_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> stopped_{false};
  std::map<std::string, std::shared_ptr<node_state>> nodes_;
  std::vector<std::shared_ptr<client>> retired_;
  std::unordered_map<std::string, std::string> node_of_id_; ///< id → node
  std::unordered_map<std::string, std::string> name_of_id_; ///< id → reusable name
  std::unordered_map<std::string, uint64_t> shape_mib_;
  placement_failures failures_;
  std::mt19937_64 rng_;
  std::deque<std::function<void()>> tasks_;
  std::thread refresher_;
  std::thread worker_;
};

/// A streamed exec's handle: cancels the node's stream; the node's loss ends it.
class fleet_stream final : public stream_handle {
public:
  void cancel() override {
    std::shared_ptr<stream_handle> inner;
    {
      std::lock_guard lk{mu};
      cancelled = true;
      inner = handle;
    }
    if (inner) inner->cancel();
  }
  std::mutex mu;
  bool cancelled = false;
  std::shared_ptr<stream_handle> handle;
};

std::shared_ptr<stream_handle> fleet_core::exec_stream(const std::string& id,
                                                       const exec_request& req, millis timeout,
                                                       exec_stream_callbacks cbs) {
  auto h = std::make_shared<fleet_stream>();
  auto on_line =
      std::make_shared<std::function<void(exec_stream_line)>>(std::move(cbs.on_line));
  by_id<int32_t>(id, timeout, std::move(cbs.on_done),
                 [id, req, h, on_line](client& c, millis t, callback<int32_t> done) {
                   exec_stream_callbacks inner;
                   inner.on_line = [on_line](exec_stream_line l) { (*on_line)(std::move(l)); };
                   inner.on_done = std::move(done);
                   auto handle = c.exec_stream(id, req, t, std::move(inner));
                   bool cancel_now = false;
                   {
                     std::lock_guard lk{h->mu};
                     h->handle = handle;
                     cancel_now = h->cancelled;
                   }
                   if (cancel_now) handle->cancel();
                 });
  return h;
}

void fleet_core::list(const std::string& status, uint32_t limit, uint32_t offset,
                      millis timeout, callback<sandbox_list> cb) {
  std::vector<std::shared_ptr<node_state>> all;
  {
    std::lock_guard lk{mu_};
    for (auto& [_, n] : nodes_)
      if (n->api) all.push_back(n);
  }
  if (all.empty()) return cb(fail(ec::unavailable, "no control plane node is known"));
  struct gather {
    std::mutex mu;
    size_t left;
    std::vector<std::pair<std::string, sandbox_list>> got;
    std::optional<failure> first_error;
  };
  auto g = std::make_shared<gather>();
  g->left = all.size();
  auto self = shared_from_this();
  auto finish = [self, g, limit, offset, cb = std::move(cb)]() mutable {
    if (g->got.empty()) return cb(*g->first_error);
    sandbox_list merged;
    std::sort(g->got.begin(), g->got.end(), [](auto& a, auto& b) { return a.first < b.first; });
    {
      std::lock_guard lk{self->mu_};
      for (auto& [node, l] : g->got)
        for (auto& v : l.data) {
          self->node_of_id_[v.id] = node;
          if (v.name.compare(0, reusable_prefix.size(), reusable_prefix) == 0)
            self->name_of_id_[v.id] = v.name;
        }
    }
    std::vector<sandbox_view> flat;
    for (auto& [_, l] : g->got)
      for (auto& v : l.data)
        flat.push_back(std::move(v));
    merged.total = flat.size();
    auto end = limit == 0 ? flat.size() : std::min<size_t>(flat.size(), size_t{offset} + limit);
    for (size_t i = offset; i < end; ++i)
      merged.data.push_back(std::move(flat[i]));
    cb(std::move(merged));
  };
  auto shared_finish = std::make_shared<decltype(finish)>(std::move(finish));
  for (auto& n : all)
    list_node(n, status, timeout, {}, [g, n, shared_finish](result<sandbox_list> r) {
      bool last = false;
      {
        std::lock_guard lk{g->mu};
        if (r)
          g->got.emplace_back(n->name, std::move(*r));
        else if (!g->first_error)
          g->first_error =
              fail(r.error().code, "control plane node " + n->name + ": " + r.error().message);
        last = --g->left == 0;
      }
      if (last) (*shared_finish)();
    });
}

/// What callers hold: forwards every call to the core and shuts it down when dropped.
class fleet_client final : public client {
public:
  explicit fleet_client(std::shared_ptr<fleet_core> core)
      : client(core->where())
      , core_(std::move(core)) {}
  ~fleet_client() override { core_->shutdown(); }

  fleet_snapshot snapshot() const { return core_->snapshot(); }

  void shapes(millis t, callback<shape_list> cb) override { core_->shapes(t, std::move(cb)); }
  void who(millis t, callback<whoami> cb) override { core_->who(t, std::move(cb)); }
  void capabilities_of(millis t, callback<capabilities> cb) override {
    core_->capabilities_of(t, std::move(cb));
  }
  void capacity(millis t, callback<node_capacity> cb) override {
    core_->capacity(t, std::move(cb));
  }
  void create(const sandbox_create_request& req, millis t,
              callback<sandbox_created> cb) override {
    core_->create(req, t, std::move(cb));
  }
  void get(const std::string& id, millis t, callback<sandbox_view> cb) override {
    core_->get(id, t, std::move(cb));
  }
  void list(const std::string& status, uint32_t limit, uint32_t offset, millis t,
            callback<sandbox_list> cb) override {
    core_->list(status, limit, offset, t, std::move(cb));
  }
  void put_file(const std::string& id, const std::string& path, shared_bytes body, millis t,
                callback<bool> cb) override {
    core_->put_file(id, path, std::move(body), t, std::move(cb));
  }
  void get_file(const std::string& id, const std::string& path, size_t max_bytes, millis t,
                callback<std::string> cb) override {
    core_->get_file(id, path, max_bytes, t, std::move(cb));
  }
  void exec(const std::string& id, const exec_request& req, millis t,
            callback<exec_result> cb) override {
    core_->exec(id, req, t, std::move(cb));
  }
  std::shared_ptr<stream_handle> exec_stream(const std::string& id, const exec_request& req,
                                             millis t, exec_stream_callbacks cbs) override {
    return core_->exec_stream(id, req, t, std::move(cbs));
  }
  void get_egress(const std::string& id, millis t, callback<egress_body> cb) override {
    core_->get_egress(id, t, std::move(cb));
  }
  void put_egress(const std::string& id, const egress_policy& e, millis t,
                  callback<egress_body> cb) override {
    core_->put_egress(id, e, t, std::move(cb));
  }
  void pause(const std::string& id, millis t, callback<sandbox_view> cb) override {
    core_->pause(id, t, std::move(cb));
  }
  void resume(const std::string& id, millis t, callback<sandbox_view> cb) override {
    core_->resume(id, t, std::move(cb));
  }
  void remove(const std::string& id, millis t, callback<sandbox_deleted> cb) override {
    core_->remove(id, t, std::move(cb));
  }
  void remove_if_idle(const std::string& id, uint32_t idle_s, millis t,
                      callback<sandbox_deleted> cb) override {
    core_->remove_if_idle(id, idle_s, t, std::move(cb));
  }
  void stop(const std::string& id, millis t, callback<sandbox_view> cb) override {
    core_->stop(id, t, std::move(cb));
  }
  void endpoint_of(const std::string& id, millis t, callback<endpoint> cb) override {
    core_->endpoint_of(id, t, std::move(cb));
  }
  void shutdown() override { core_->shutdown(); }

private:
  std::shared_ptr<fleet_core> core_;
};

} // namespace

result<std::shared_ptr<client>> make_fleet_client(fleet_config cfg) {
  if (cfg.urls.empty() && cfg.etcd_url.empty())
    return fail(ec::bad_request, "a fleet needs control plane URLs or an etcd URL");
  std::shared_ptr<fleet::etcd_client> etcd;
  endpoint ep;
  ep.kind = provider::local;
  ep.api_key = cfg.api_key;
  if (!cfg.etcd_url.empty()) {
    auto made = fleet::etcd_client::make(cfg.etcd_url, cfg.probe_timeout);
    if (!made) return made.error();
    etcd = std::move(*made);
    ep.base_url = cfg.etcd_url;
  } else {
    for (auto& u : cfg.urls)
      ep.base_url += (ep.base_url.empty() ? "" : ",") + u;
  }
  auto core = std::make_shared<fleet_core>(std::move(ep), std::move(cfg), std::move(etcd));
  core->start();
  return std::shared_ptr<client>(std::make_shared<fleet_client>(std::move(core)));
}

std::optional<fleet_snapshot> fleet_snapshot_of(const client& c) {
  for (auto* at = &c; at != nullptr; at = at->wrapped())
    if (auto* f = dynamic_cast<const fleet_client*>(at)) return f->snapshot();
  return std::nullopt;
}

std::string prometheus_text(const fleet_snapshot& s) {
  std::string out;
  auto gauge = [&](const char* name, const char* type, const char* help) {
    out += std::string{"# HELP "} + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto line = [&](const char* name, const std::string& node, uint64_t v) {
    out += std::string{name} + "{node=" + quote_json(node) + "} " + std::to_string(v) + "\n";
  };
  struct metric {
    const char* name;
    const char* help;
    uint64_t (*of)(const fleet_node_view&);
  };
  static const metric metrics[] = {
      {"guestflow_fleet_node_ready", "1 when the node is reachable and ready",
       [](const fleet_node_view& n) -> uint64_t { return n.reachable && n.capacity.ready; }},
      {"guestflow_fleet_node_draining", "1 while the node is draining",
       [](const fleet_node_view& n) -> uint64_t { return n.capacity.draining; }},
      {"guestflow_fleet_node_memory_committed_mib",
       "memory committed on the node (its report plus creates placed since)",
       [](const fleet_node_view& n) { return n.capacity.memory_committed_mib; }},
      {"guestflow_fleet_node_memory_budget_mib", "the node's memory budget",
       [](const fleet_node_view& n) { return n.capacity.memory_budget_mib; }},
      {"guestflow_fleet_node_guests", "guests on the node",
       [](const fleet_node_view& n) { return n.capacity.guests; }},
      {"guestflow_fleet_node_max_guests", "the node's guest cap",
       [](const fleet_node_view& n) { return n.capacity.max_guests; }},
  };
  for (auto& m : metrics) {
    gauge(m.name, "gauge", m.help);
    for (auto& n : s.nodes)
      line(m.name, n.node, m.of(n));
  }
  gauge("guestflow_fleet_node_placed_total", "counter",
        "creates this runtime placed on the node");
  for (auto& n : s.nodes)
    line("guestflow_fleet_node_placed_total", n.node, n.placed);
  gauge("guestflow_fleet_placement_failures_total", "counter",
        "placements that failed or moved on, by reason");
  for (auto [reason, v] : {std::pair<const char*, uint64_t>{"no_room", s.failures.no_room},
                           {"refused", s.failures.refused},
                           {"unreachable", s.failures.unreachable},
                           {"no_nodes", s.failures.no_nodes}})
    out += std::string{"guestflow_fleet_placement_failures_total{reason=\""} + reason + "\"} " +
           std::to_string(v) + "\n";
  return out;
}

bool is_fleet_url(std::string_view base_url) {
  auto u = trim(base_url);
  return u.substr(0, 7) == "etcd://" || u.find(',') != std::string_view::npos;
}

result<fleet_config> fleet_config_of(const endpoint& ep, const client_config& node) {
  fleet_config cfg;
  cfg.api_key = ep.api_key;
  cfg.node = node;
  auto u = trim(ep.base_url);
  if (u.substr(0, 7) == "etcd://") {
    cfg.etcd_url = std::string{u};
    return cfg;
  }
  for (auto& one : split(u, ",")) {
    auto t = std::string{trim(one)};
    if (t.empty()) continue;
    auto parsed = parse_base_url(t);
    if (!parsed) return parsed.error();
    cfg.urls.push_back(t);
  }
  if (cfg.urls.empty()) return fail(ec::bad_request, "no control plane URL in the list");
  return cfg;
}

} // namespace guestflow::cp
