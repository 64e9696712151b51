#include "controlplane/local/service/warm_pool.hpp"

#include "controlplane/local/guests/guest_exec.hpp"
#include "controlplane/local/service/clock.hpp"
#include "controlplane/local/service/shapes.hpp"

#include <algorithm>
#include <set>

namespace guestflow::local {

warm_pool::warm_pool(guest_backend& backend, record_store& store, image_store& images,
                     std::mutex& mu, settings s, std::vector<guest_record> adopted)
    : backend_(backend)
    , store_(store)
    , images_(images)
    , mu_(mu)
    , settings_(std::move(s)) {
  for (auto& r : adopted) {
    pool_key key{r.shape, r.rootfs};
    python_waiter::kill_stale(r.runtime);
    auto image = images_.resolve(r.rootfs);
    auto waiter = start_waiter(r.runtime, image ? image->path_prepend : std::string{});
    ready_[key].push_back(pool_guest{std::move(r), std::move(waiter)});
  }
  filler_ = std::thread{[this] { fill(); }};
}

warm_pool::~warm_pool() {
  stop();
}

std::optional<pool_guest> warm_pool::take(const pool_key& key) {
  auto i = ready_.find(key);
  if (i == ready_.end() || i->second.empty()) return std::nullopt;
  // The oldest first: every guest spends about the same time waiting.
  auto r = std::move(i->second.front());
  i->second.erase(i->second.begin());
  wake_.notify_one();
  return r;
}

void warm_pool::discard(guest_record r) {
  // After stop() nobody deletes it here; its record (still pooled) makes the next start's
  // reconcile delete it, since its init is gone or it is no longer wanted.
  discarded_.push_back(pool_guest{std::move(r), nullptr});
  wake_.notify_one();
}

uint32_t warm_pool::target_of(const pool_key& key) const {
  for (const auto& t : settings_.targets)
    if (t.key == key) return t.count;
  return 0;
}

std::vector<pool_status> warm_pool::status() const {
  std::vector<pool_status> out;
  auto count = [&](const pool_key& key, pool_status& s) {
    if (auto i = ready_.find(key); i != ready_.end())
      s.ready = static_cast<uint32_t>(i->second.size());
    if (auto i = creating_.find(key); i != creating_.end()) s.creating = i->second;
  };
  for (const auto& t : settings_.targets) {
    pool_status s{t.key, t.count};
    count(t.key, s);
    out.push_back(s);
  }
  // Pools no target names any more (adopted after a restart with another spec), while
  // they still hold guests.
  std::set<pool_key> extra;
  for (const auto& [key, v] : ready_)
    if (!v.empty()) extra.insert(key);
  for (const auto& [key, n] : creating_)
    if (n > 0) extra.insert(key);
  for (const auto& key : extra) {
    if (target_of(key) > 0) continue;
    pool_status s{key, 0};
    count(key, s);
    out.push_back(s);
  }
  return out;
}

bool warm_pool::uses_image(const std::string& image) const {
  for (const auto& t : settings_.targets)
    if (t.key.image == image) return true;
  for (const auto& [key, v] : ready_)
    if (key.image == image && !v.empty()) return true;
  for (const auto& [key, n] : creating_)
    if (key.image == image && n > 0) return true;
  for (const auto& g : discarded_)
    if (g.rec.rootfs == image) return true;
  return false;
}

std::optional<pool_guest> warm_pool::next_to_delete() {
  std::optional<pool_guest> out;
  if (!discarded_.empty()) {
    out = std::move(discarded_.back());
    discarded_.pop_back();
  } else {
    for (auto& [key, v] : ready_) {
      auto building = creating_.count(key) ? creating_.at(key) : 0u;
      if (!v.empty() && v.size() + building > target_of(key)) {
        out = std::move(v.back());
        v.pop_back();
        break;
      }
    }
  }
  return out;
}

std::optional<pool_key> warm_pool::next_to_build(clock::time_point now) const {
  for (const auto& t : settings_.targets) {
    auto r = ready_.find(t.key);
    auto c = creating_.find(t.key);
    size_t have =
        (r == ready_.end() ? 0 : r->second.size()) + (c == creating_.end() ? 0 : c->second);
    if (have >= t.count) continue;
    if (auto b = backoff_.find(t.key); b != backoff_.end() && b->second.until > now) continue;
    return t.key;
  }
  return std::nullopt;
}

void warm_pool::failed(const pool_key& key, const std::string& why) {
  auto& b = backoff_[key];
  ++b.failures;
  auto delay = settings_.first_backoff;
  for (uint32_t i = 1; i < b.failures && delay < settings_.max_backoff; ++i)
    delay *= 2;
  delay = std::min(delay, settings_.max_backoff);
  b.until = clock::now() + delay;
  if (settings_.warn)
    settings_.warn("warm pool " + key.shape + "@" + key.image + ": create failed (" +
                   std::to_string(b.failures) + " in a row), next try in " +
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
  spec.egress = egress_policy::deny_all();
  guest_record rec;
  rec.id = spec.id;
  rec.name = spec.id;
  rec.status = sandbox_status::creating;
  rec.shape = shp->id;
  rec.rootfs = spec.rootfs;
  rec.egress = spec.egress;
  rec.created_at = now_rfc3339();
  rec.runtime.id = spec.id;
  rec.pooled = true;
  // Persisted before building: a crash mid-create leaves a record reconcile cleans up.
  if (auto ok = store_.put(rec); !ok) return failed(key, ok.error().message);
  ++creating_[key];
  lock.unlock();
  auto rt = backend_.create(spec);
  lock.lock();
  --creating_[key];
  if (!rt) {
    store_.erase(rec.id); // the backend removed what it built
    return failed(key, rt.error().message);
  }
  rec.runtime = *rt;
  rec.status = sandbox_status::running;
  std::unique_ptr<python_waiter> waiter;
  if (settings_.python_waiter) {
    lock.unlock();
    waiter = start_waiter(*rt, image->path_prepend);
    lock.lock();
  }
  if (auto ok = store_.put(rec); !ok) {
    discarded_.push_back(pool_guest{std::move(rec), std::move(waiter)});
    return failed(key, ok.error().message);
  }
  backoff_.erase(key);
  ready_[key].push_back(pool_guest{std::move(rec), std::move(waiter)});
}

std::unique_ptr<python_waiter> warm_pool::start_waiter(const guest_runtime& rt,
                                                       const std::string& path_prepend) {
  if (!settings_.python_waiter) return nullptr;
  std::map<std::string, std::string> envs;
  // What every exec in the guest gets (control_plane::start_exec): its image's PATH first.
  if (!path_prepend.empty()) envs["PATH"] = path_prepend + ":" + default_guest_path;
  auto w = python_waiter::start(backend_, rt, envs);
  if (!w) {
    if (settings_.warn)
      settings_.warn("warm pool: no python waiter in " + rt.id + ": " + w.error().message);
    return nullptr;
  }
  // Offered once its interpreter runs: a take right after the build gets the whole saving.
  // One that ended at once is an image without python3: nothing to warn about.
  if (!(*w)->await_fifo(std::chrono::seconds{5})) {
    if (settings_.warn && !(*w)->exited())
      settings_.warn("warm pool: the python waiter in " + rt.id + " did not start in 5 s");
    return nullptr;
  }
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
    if (auto r = next_to_delete()) {
      delete_guest(lock, std::move(*r));
      continue;
    }
    auto now = clock::now();
    if (auto key = next_to_build(now)) {
      build(lock, *key);
      continue;
    }
    // Nothing to do: sleep until a take, a stop, or the end of a pool's backoff.
    std::optional<clock::time_point> until;
    for (const auto& [key, b] : backoff_)
      if (b.until > now && (!until || b.until < *until)) until = b.until;
    if (until)
      wake_.wait_until(lock, *until);
    else
      wake_.wait(lock);
  }
}

void warm_pool::halt() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    stopping_ = true;
  }
  wake_.notify_all();
}

size_t warm_pool::stop() {
  {
    std::lock_guard<std::mutex> lock{mu_};
    if (stopped_) return 0;
    stopped_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (filler_.joinable()) filler_.join();
  std::unique_lock<std::mutex> lock{mu_};
  std::vector<pool_guest> all = std::move(discarded_);
  discarded_.clear();
  for (auto& [key, v] : ready_)
    for (auto& r : v)
      all.push_back(std::move(r));
  ready_.clear();
  size_t n = 0;
  for (auto& r : all)
    if (delete_guest(lock, std::move(r))) ++n;
  return n;
}

} // namespace guestflow::local
