#include "controlplane/local/service/warm_pool.hpp"

#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <poll.h>
#include <set>
#include <unistd.h>

namespace guestflow::local {

namespace {

/// gVisor: the detached snapshot waiter (its image's preload imported) started in the guest,
/// true once it said "ready" (it then waits on the FIFO for the guest's first run).
bool start_fifo_waiter(guest_backend& backend, const guest_runtime& rt,
                       const resolved_image& image) {
  std::map<std::string, std::string> envs;
  if (!image.path_prepend.empty()) envs["PATH"] = image.path_prepend + ":" + default_guest_path;
  auto p = backend.start_exec(
      rt, detached_snapshot_waiter(python_waiter_script, preload_of(image)), envs);
  if (!p) return false;
  // A heavy engine's import under gVisor's ptrace platform: seconds.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  std::string out;
  char buf[4096];
  bool eof = false;
  while (!eof && out.size() < 65536) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) break;
    pollfd pf{p->stdout_fd, POLLIN, 0};
    if (::poll(&pf, 1, static_cast<int>(left)) <= 0) continue;
    auto n = ::read(p->stdout_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0)
      eof = true;
    else
      out.append(buf, static_cast<size_t>(n));
  }
  if (!eof) backend.kill_exec(*p);
  bool ok = backend.reap(*p) == 0 && out.size() >= 6 &&
            out.compare(out.size() - 6, 6, "ready\n") == 0;
  return ok;
}

} // namespace

std::string preload_of(const resolved_image& image) {
  std::string out;
  for (const auto& m : image.preload)
    out += (out.empty() ? "" : ",") + m;
  return out;
}

warm_pool::warm_pool(guest_backend& backend, record_store& store, image_store& images,
                     std::mutex& mu, settings s, std::vector<guest_record> adopted)
    : backend_(backend)
    , store_(store)
    , images_(images)
    , mu_(mu)
    , settings_(std::move(s)) {
  // A target's preload is its image's now (the spec never names it).
  for (auto& t : settings_.targets) {
    if (auto image = images_.resolve(t.key.image)) t.key.preload = preload_of(*image);
    auto& p = pools_[t.key];
    p.floor = t.count;
    p.cap = t.cap;
  }
  for (auto& r : adopted) {
    auto image = images_.resolve(r.rootfs);
    pool_key key{r.shape, r.rootfs, r.egress, image ? preload_of(*image) : std::string{},
                 r.runtime.isolation};
    if (r.runtime.isolation == guest_isolation::namespaces)
      python_waiter::kill_stale(r.runtime);
    // A gVisor guest's FIFO waiter (if any) is not known after a restart: rebuilt instead.
    if (r.runtime.isolation == guest_isolation::gvisor && settings_.python_waiter &&
        r.started_from != "snapshot") {
      discarded_.push_back(pool_guest{std::move(r), nullptr});
      continue;
    }
    auto waiter = start_waiter(r.runtime, image ? &*image : nullptr);
    pools_[key].ready.push_back(pool_guest{std::move(r), std::move(waiter)});
  }
  // Templates a dead server left (its guests were adopted above as ordinary guests).
  fork_template::kill_stale(backend_);
  auto n = settings_.builders;
  if (n == 0) n = std::clamp<uint32_t>(std::thread::hardware_concurrency(), 1, max_builders);
  for (uint32_t i = 0; i < n; ++i)
    builders_.emplace_back([this] { fill(); });
}

warm_pool::~warm_pool() {
  stop();
}

void warm_pool::demand(pool& p, clock::time_point now) {
  auto since = now - settings_.demand_window;
  p.demand.erase(p.demand.begin(),
                 std::find_if(p.demand.begin(), p.demand.end(),
                              [&](clock::time_point t) { return t >= since; }));
  p.demand.push_back(now);
  p.last_demand = now;
}

uint32_t warm_pool::target_of(const pool& p, clock::time_point now) const {
  auto since = now - settings_.demand_window;
  auto first = std::find_if(p.demand.begin(), p.demand.end(),
                            [&](clock::time_point t) { return t >= since; });
  auto n = static_cast<uint64_t>(p.demand.end() - first);
  if (n == 0) return p.floor;
  // Little's law: a pool that keeps up holds what demand takes during one fill, with half
  // again as a margin, and at least the last fill time's burst (a batch of runs at once).
  using ms = std::chrono::milliseconds;
  auto fill = std::max<int64_t>(p.fill_estimate.count(), 1);
  auto span = std::max<int64_t>(
      {std::chrono::duration_cast<ms>(now - *first).count(), fill, int64_t{1000}});
  auto want = (3 * n * static_cast<uint64_t>(fill) + 2 * span - 1) / (2 * span) + 1;
  auto burst_since = now - ms{fill};
  auto burst = static_cast<uint64_t>(
      p.demand.end() - std::find_if(first, p.demand.end(),
                                    [&](clock::time_point t) { return t >= burst_since; }));
  want = std::max(want, burst);
  return static_cast<uint32_t>(std::clamp<uint64_t>(want, p.floor, p.cap));
}

std::optional<pool_guest> warm_pool::take(const pool_key& key) {
  auto i = pools_.find(key);
  if (i == pools_.end()) return std::nullopt;
  auto& p = i->second;
  demand(p, clock::now());
  if (p.ready.empty()) {
    ++p.misses;
    wake_.notify_all(); // demand rose: the target may have
    return std::nullopt;
  }
  // The oldest first: every guest spends about the same time waiting. One that died
  // waiting (killed; a fork template's sandbox gone) is discarded, the next one taken.
  while (!p.ready.empty()) {
    auto r = std::move(p.ready.front());
    p.ready.erase(p.ready.begin());
    wake_.notify_one();
    if (!backend_.alive(r.rec.runtime) || (r.waiter && r.waiter->exited())) {
      discarded_.push_back(std::move(r));
      continue;
    }
    ++p.takes;
    return r;
  }
  ++p.misses;
  return std::nullopt;
}

void warm_pool::await_build(std::unique_lock<std::mutex>& lock, const pool_key& key,
                            const resolved_image& image) {
  // Without a preload a cold guest costs about what a clone does: no reason to wait.
  if (!pools_.count(key) || image.preload.empty() || !forkable(key, image)) return;
  // A build in flight, or one a builder is about to start (below target, not backing off,
  // room for it): not a pool that will stay empty.
  auto coming = [&](const pool& p) {
    if (p.creating > p.doomed) return true;
    const auto now = clock::now();
    if (p.backoff_until > now || p.ready.size() + p.creating - p.doomed >= target_of(p, now))
      return false;
    auto s = find_shape(key.shape);
    return s && (!settings_.room || settings_.room(*s, held()));
  };
  built_.wait_for(lock, std::chrono::seconds{1}, [&] {
    auto p = pools_.find(key);
    return stopping_ || p == pools_.end() || !p->second.ready.empty() || !coming(p->second);
  });
}

void warm_pool::put_back(const pool_key& key, pool_guest g) {
  auto& p = pools_[key];
  if (p.takes > 0) --p.takes;
  p.ready.insert(p.ready.begin(), std::move(g));
}

void warm_pool::discard(guest_record r) {
  // After stop() nobody deletes it here; its record (still pooled) makes the next start's
  // reconcile delete it, since its init is gone or it is no longer wanted.
  discarded_.push_back(pool_guest{std::move(r), nullptr});
  wake_.notify_one();
}

std::vector<pool_guest>
warm_pool::lend(const std::function<bool(const capacity_usage& freed)>& fits) {
  std::vector<std::pair<pool_key, pool*>> order;
  for (auto& [key, p] : pools_)
    order.emplace_back(key, &p);
  // Least recently useful first: the longest since a take or miss (never: first of all).
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->last_demand < b.second->last_demand;
  });
  capacity_usage freed;
  std::map<pool*, uint32_t> ready_taken, builds_doomed;
  bool ok = false;
  auto give = [&](const pool_key& key) {
    if (auto s = find_shape(key.shape)) freed.memory_mib += s->mem_mib;
    ++freed.guests;
    return fits(freed);
  };
  for (auto& [key, p] : order)
    for (size_t i = 0; !ok && i < p->ready.size(); ++i) {
      ++ready_taken[p];
      ok = give(key);
    }
  for (auto& [key, p] : order)
    for (uint32_t i = p->doomed; !ok && i < p->creating; ++i) {
      ++builds_doomed[p];
      ok = give(key);
    }
  std::vector<pool_guest> out;
  if (!ok) return out;
  for (auto& [p, n] : ready_taken)
    for (uint32_t i = 0; i < n; ++i) {
      // The newest first: the oldest are next to be taken.
      out.push_back(std::move(p->ready.back()));
      p->ready.pop_back();
      ++p->evicted;
    }
  for (auto& [p, n] : builds_doomed) {
    p->doomed += n;
    p->evicted += n;
  }
  return out;
}

void warm_pool::release(std::vector<pool_guest> victims) {
  std::unique_lock<std::mutex> lock{mu_};
  for (auto& g : victims)
    delete_guest(lock, std::move(g));
}

capacity_usage warm_pool::held() const {
  capacity_usage u;
  for (const auto& [key, p] : pools_) {
    uint64_t n = p.ready.size() + p.creating - p.doomed;
    if (auto s = find_shape(key.shape)) u.memory_mib += s->mem_mib * n;
    u.guests += static_cast<uint32_t>(n);
  }
  return u;
}

std::vector<pool_status> warm_pool::status() const {
  std::vector<pool_status> out;
  auto now = clock::now();
  for (const auto& [key, p] : pools_) {
    if (p.cap == 0 && p.ready.empty() && p.creating == 0) continue;
    pool_status s;
    s.key = key;
    s.target = target_of(p, now);
    s.ready = static_cast<uint32_t>(p.ready.size());
    s.creating = p.creating;
    s.floor = p.floor;
    s.cap = p.cap;
    s.takes = p.takes;
    s.misses = p.misses;
    s.evicted = p.evicted;
    s.fills = p.fills;
    s.fill_ms = p.fill_ms;
    out.push_back(std::move(s));
  }
  return out;
}

bool warm_pool::uses_image(const std::string& image) const {
  for (const auto& [key, p] : pools_)
    if (key.image == image && (p.cap > 0 || !p.ready.empty() || p.creating > 0)) return true;
  for (const auto& g : discarded_)
    if (g.rec.rootfs == image) return true;
  return false;
}

std::optional<pool_guest> warm_pool::next_to_delete(clock::time_point now) {
  std::optional<pool_guest> out;
  if (!discarded_.empty()) {
    out = std::move(discarded_.back());
    discarded_.pop_back();
    return out;
  }
  for (auto& [key, p] : pools_) {
    // Recent demand keeps up to the cap: a pool does not delete what it may build again.
    auto keep = p.last_demand + settings_.demand_window > now ? p.cap : target_of(p, now);
    if (!p.ready.empty() && p.ready.size() + p.creating - p.doomed > keep) {
      out = std::move(p.ready.back());
      p.ready.pop_back();
      break;
    }
  }
  return out;
}

std::optional<pool_key> warm_pool::next_to_build(clock::time_point now, bool& blocked) {
  const pool_key* best = nullptr;
  int64_t best_gap = 0;
  auto held_now = held();
  for (auto& [key, p] : pools_) {
    int64_t have = static_cast<int64_t>(p.ready.size() + p.creating - p.doomed);
    auto gap = static_cast<int64_t>(target_of(p, now)) - have;
    if (gap <= 0 || p.backoff_until > now || gap <= best_gap) continue;
    if (settings_.room) {
      auto s = find_shape(key.shape);
      if (s && !settings_.room(*s, held_now)) {
        blocked = true;
        continue;
      }
    }
    best = &key;
    best_gap = gap;
  }
  if (!best) return std::nullopt;
  return *best;
}

void warm_pool::failed(const pool_key& key, const std::string& why) {
  auto& p = pools_[key];
  ++p.failures;
  auto delay = settings_.first_backoff;
  for (uint32_t i = 1; i < p.failures && delay < settings_.max_backoff; ++i)
    delay *= 2;
  delay = std::min(delay, settings_.max_backoff);
  p.backoff_until = clock::now() + delay;
  if (settings_.warn)
    settings_.warn("warm pool " + to_string(key) + ": create failed (" +
                   std::to_string(p.failures) + " in a row), next try in " +
                   std::to_string(delay.count()) + " ms: " + why);
}

void warm_pool::build(std::unique_lock<std::mutex>& lock, const pool_key& key) {
  auto image = images_.resolve(key.image);
  if (!image) return failed(key, image.error().message);
  auto shp = resolve_shape(key.shape);
  if (!shp) return failed(key, shp.error().message);
  guest_spec spec;
  spec.id = new_guest_id();
  spec.name = spec.id; // also its hostname, which stays the id once taken
  spec.shape_info = *shp;
  spec.rootfs = image->name;
  spec.image = image->layout;
  // As a create of this key builds it: with egress, its netns and nftables rules too.
  spec.egress = key.egress;
  spec.isolation = key.isolation;
  guest_record rec;
  rec.id = spec.id;
  rec.name = spec.id;
  rec.status = sandbox_status::creating;
  rec.shape = shp->id;
  rec.rootfs = spec.rootfs;
  rec.egress = spec.egress;
  rec.created_at = now_rfc3339();
  rec.runtime.id = spec.id;
  rec.runtime.isolation = spec.isolation;
  rec.pooled = true;
  // Persisted before building: a crash mid-create leaves a record reconcile cleans up.
  if (auto ok = store_.put(rec); !ok) return failed(key, ok.error().message);
  ++pools_[key].creating;
  auto started = clock::now();
  lock.unlock();
  std::shared_ptr<fork_template> tpl;
  unique_fd ctl;
  std::vector<std::string> env;
  if (forkable(key, *image)) {
    // The waiter's environment, which the template's interpreter starts with.
    std::map<std::string, std::string> envs;
    if (!image->path_prepend.empty())
      envs["PATH"] = image->path_prepend + ":" + default_guest_path;
    env = exec_environment(envs);
    tpl = template_for(key, *image, spec, env);
  }
  if (tpl) spec.launch = [&](const launch_request& req) { return tpl->clone(req, ctl); };
  // A gVisor guest of an image with a snapshot is restored from it, as a create would be
  // (its preload imported, its python3 waiting): a take is then what a create builds.
  restored_guest built;
  const auto snapshot = images_.snapshot_dir(image->name);
  if (spec.isolation == guest_isolation::gvisor && !snapshot.empty() &&
      has_checkpoint(snapshot))
    built = restore_or_boot(backend_, spec, snapshot, "snapshot");
  else
    built.rt = backend_.create(spec);
  auto& rt = built.rt;
  // A cold guest no create of this key takes: back off as for a failed build (no churn).
  if (rt && !built.restore_error.empty()) {
    backend_.destroy(*rt);
    rt = fail(ec::unavailable, built.restore_error);
  }
  if (spec.isolation == guest_isolation::gvisor) rec.started_from = built.started_from;
  std::unique_ptr<python_waiter> waiter;
  if (rt && tpl)
    waiter = python_waiter::forked(backend_, *rt, std::move(ctl), std::move(env));
  else if (rt && settings_.python_waiter)
    waiter = start_waiter(*rt, &*image);
  const bool fifo = rt && spec.isolation == guest_isolation::gvisor &&
                    settings_.python_waiter && rec.started_from != "snapshot" &&
                    start_fifo_waiter(backend_, *rt, *image);
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(clock::now() - started);
  lock.lock();
  auto& p = pools_[key];
  --p.creating;
  built_.notify_all(); // creates waiting for it (await_build) look once the mutex is free
  if (!rt) {
    store_.erase(rec.id); // the backend removed what it built
    if (p.doomed > 0) --p.doomed;
    return failed(key, rt.error().message);
  }
  rec.runtime = *rt;
  rec.status = sandbox_status::running;
  ++p.fills;
  p.fill_ms += static_cast<uint64_t>(took.count());
  p.fill_estimate = (3 * p.fill_estimate + took) / 4;
  p.failures = 0;
  p.backoff_until = {};
  if (p.doomed > 0) {
    // Lent to a create while it was being built: its room is that create's now.
    --p.doomed;
    discarded_.push_back(pool_guest{std::move(rec), std::move(waiter)});
    return;
  }
  if (auto ok = store_.put(rec); !ok) {
    discarded_.push_back(pool_guest{std::move(rec), std::move(waiter)});
    return failed(key, ok.error().message);
  }
  p.ready.push_back(pool_guest{std::move(rec), std::move(waiter), fifo});
}

bool warm_pool::fork_pool_wanted() {
  const char* v = std::getenv("GUESTFLOW_FORK_POOL");
  return !v || std::string{v} != "0";
}

bool warm_pool::forkable(const pool_key& key, const resolved_image& image) const {
  if (!settings_.fork_server || !settings_.python_waiter ||
      key.isolation != guest_isolation::namespaces ||
      key.egress.mode != egress_policy::kind::deny_all)
    return false;
  if (image.layout) {
    if (!image.layout->root.empty()) return false; // its python3 and /usr/bin/env unknown
    // A bind under /tmp would vanish under a clone's fresh /tmp.
    for (const auto& b : image.layout->ro_binds)
      if (b == "/tmp" || b.rfind("/tmp/", 0) == 0) return false;
  }
  return true;
}

std::shared_ptr<fork_template> warm_pool::template_for(const pool_key& key,
                                                       const resolved_image& image,
                                                       const guest_spec& spec,
                                                       const std::vector<std::string>& env) {
  std::lock_guard<std::mutex> guard{templates_mu_};
  auto& slot = templates_[key];
  if (slot.broken) return nullptr;
  if (slot.tpl) {
    if (slot.tpl->alive()) return slot.tpl;
    slot.tpl.reset();
    slot.broken = true;
    if (settings_.warn)
      settings_.warn("warm pool " + to_string(key) +
                     ": its fork template died; the pool builds ordinary guests from now on");
    return nullptr;
  }
  size_t used = 0;
  for (const auto& [k, s] : templates_)
    if (s.tpl) ++used;
  auto t = fork_template::start(backend_, spec, env, image.preload, python_waiter_script, used);
  if (!t) {
    slot.broken = true;
    if (settings_.warn)
      settings_.warn("warm pool " + to_string(key) + ": no fork template (" +
                     t.error().message + "); the pool builds ordinary guests");
    return nullptr;
  }
  if (settings_.warn)
    for (const auto& why : (*t)->problems())
      settings_.warn("warm pool " + to_string(key) + ": preload " + why +
                     " (the fork template goes on without it)");
  slot.tpl = std::move(*t);
  return slot.tpl;
}

std::unique_ptr<python_waiter> warm_pool::start_waiter(const guest_runtime& rt,
                                                       const resolved_image* image) {
  // The waiter finds its interpreter through the host's /proc, which cannot see into
  // gVisor's Sentry: a gVisor pool guest is kept without one.
  if (!settings_.python_waiter || rt.isolation == guest_isolation::gvisor) return nullptr;
  std::map<std::string, std::string> envs;
  // What every exec in the guest gets (control_plane::start_exec): its image's PATH first.
  if (image && !image->path_prepend.empty())
    envs["PATH"] = image->path_prepend + ":" + default_guest_path;
  auto w = python_waiter::start(backend_, rt, envs,
                                image ? image->preload : std::vector<std::string>{});
  if (!w) {
    if (settings_.warn)
      settings_.warn("warm pool: no python waiter in " + rt.id + ": " + w.error().message);
    return nullptr;
  }
  // Offered once its interpreter runs (and imported its preload): a take right after the
  // build gets the whole saving. One that ended at once is an image without python3:
  // nothing to warn about.
  if (!(*w)->await_fifo(std::chrono::seconds{5})) {
    if (settings_.warn && !(*w)->exited())
      settings_.warn("warm pool: the python waiter in " + rt.id + " did not start in time");
    return nullptr;
  }
  // A module that failed to import: said once, and the waiter goes on without it.
  if (settings_.warn)
    for (const auto& why : (*w)->preload_problems())
      settings_.warn("warm pool: " + why);
  return std::move(*w);
}

bool warm_pool::delete_guest(std::unique_lock<std::mutex>& lock, pool_guest g) {
  auto& r = g.rec;
  r.status = sandbox_status::destroying;
  store_.put(r); // best effort: a pooled record is deleted at the next start either way
  lock.unlock();
  g.waiter.reset(); // killed and reaped before its guest goes
  auto done = backend_.destroy(r.runtime);
  lock.lock();
  if (done) {
    store_.erase(r.id);
    return true;
  }
  // Kept, still pooled and hidden: the next start's reconcile tries again.
  r.status = sandbox_status::error;
  r.note = "leftovers not removed: " + done.error().message;
  store_.put(r);
  if (settings_.warn)
    settings_.warn("warm pool: deleting " + r.id + " failed: " + done.error().message);
  return false;
}

void warm_pool::fill() {
  std::unique_lock<std::mutex> lock{mu_};
  while (!stopping_) {
    auto now = clock::now();
    if (auto r = next_to_delete(now)) {
      delete_guest(lock, std::move(*r));
      continue;
    }
    bool blocked = false;
    if (auto key = next_to_build(now, blocked)) {
      build(lock, *key);
      continue;
    }
    // Nothing to do: sleep until a take, a stop, the end of a pool's backoff, or a second
    // (room freed by a delete elsewhere; demand leaving the window).
    auto until = now + std::chrono::seconds{1};
    for (const auto& [key, p] : pools_)
      if (p.backoff_until > now && p.backoff_until < until) until = p.backoff_until;
    wake_.wait_until(lock, until);
  }
}

void warm_pool::halt() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    stopping_ = true;
  }
  wake_.notify_all();
  built_.notify_all();
}

size_t warm_pool::stop() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (stopped_) return 0;
    stopped_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  built_.notify_all();
  for (auto& t : builders_)
    if (t.joinable()) t.join();
  std::unique_lock<std::mutex> lock{mu_};
  std::vector<pool_guest> all = std::move(discarded_);
  discarded_.clear();
  for (auto& [key, p] : pools_) {
    for (auto& r : p.ready)
      all.push_back(std::move(r));
    p.ready.clear();
  }
  size_t n = 0;
  for (auto& r : all)
    if (delete_guest(lock, std::move(r))) ++n;
  lock.unlock();
  std::lock_guard<std::mutex> guard{templates_mu_};
  templates_.clear(); // each template killed with its cgroups and spool
  // And one that died before (its pool builds ordinary guests) once its clones are gone.
  fork_template::kill_stale(backend_);
  return n;
}

} // namespace guestflow::local
