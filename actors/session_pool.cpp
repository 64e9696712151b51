#include "actors/session_pool.hpp"

namespace guestflow {

namespace {

constexpr std::string_view alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";

/// FNV-1a 64 over length-prefixed parts, twice with different seeds (128 bits for 17
/// base36 chars): ("ab","c") and ("a","bc") differ, and the hash is stable across builds
/// (std::hash is not). Versioned like names::reusable.
uint64_t session_hash(uint64_t seed, std::string_view owner, std::string_view user,
                      std::string_view thread) {
  uint64_t h = seed;
  auto feed = [&](std::string_view s) {
    auto mix = [&](unsigned char c) {
      h ^= c;
      h *= 1099511628211ull;
    };
    for (int i = 0; i < 8; ++i)
      mix(static_cast<unsigned char>(s.size() >> (8 * i)));
    for (unsigned char c : s)
      mix(c);
  };
  feed("gf-session/v2");
  feed(owner);
  feed(user);
  feed(thread);
  return h;
}

bool same_guest(const session_request& a, const session_request& b) {
  return a.image == b.image && a.allow_network == b.allow_network && a.mounts == b.mounts;
}

bool counts(session_pool::state s) {
  using st = session_pool::state;
  return s == st::creating || s == st::active || s == st::warm;
}

} // namespace

std::string session_guest_name(std::string_view owner, std::string_view user_id,
                               std::string_view thread_id) {
  std::string out = "gf-s-";
  auto hi = session_hash(1469598103934665603ull, owner, user_id, thread_id);
  auto lo = session_hash(0x9e3779b97f4a7c15ull, owner, user_id, thread_id);
  for (int i = 0; i < 17; ++i) {
    auto& h = i < 9 ? hi : lo;
    out.push_back(alphabet[h % alphabet.size()]);
    h /= alphabet.size();
  }
  return out;
}

session_pool::session_pool(session_pool_options opts)
    : opts_(opts) {}

session_pool::decision session_pool::acquire(const std::string& name,
                                             const session_request& req, time_point now) {
  (void)now;
  decision d;
  auto i = slots_.find(name);
  if (i != slots_.end()) {
    auto& s = i->second;
    if (s.st == state::creating || s.st == state::stopping || s.st == state::deleting) {
      d.what = decision::kind::wait;
      return d;
    }
    if (!same_guest(s.req, req)) {
      d.why =
          failure{ec::bad_request, "session " + name +
                                       " exists with another image, network policy or mounts; "
                                       "delete it first"};
      return d;
    }
    if (s.st != state::stopped) {
      s.st = state::active;
      s.req.thread_dir = req.thread_dir;
      d.what = decision::kind::ready;
      d.reused = true;
      return d;
    }
  }
  if (counted() >= opts_.replicas) {
    // Only a warm guest may make room, the least recently released first: an active one
    // is some conversation's sandbox right now. It is stopped, not deleted: its files stay.
    slot* victim = nullptr;
    for (auto& [n, s] : slots_)
      if (s.st == state::warm && (!victim || s.released_at < victim->released_at)) victim = &s;
    if (!victim) {
      d.why = failure{ec::capacity, "every one of the " + std::to_string(opts_.replicas) +
                                        " running session guests is active "
                                        "(GUESTFLOW_SESSION_REPLICAS); release or delete one"};
      return d;
    }
    victim->st = state::stopping;
    d.evict = victim->name;
  }
  if (i != slots_.end()) {
    auto& s = i->second;
    s.st = state::creating;
    s.req = req;
    d.what = decision::kind::wake;
    d.reused = true;
    d.guest_id = s.guest_id;
    return d;
  }
  slot s;
  s.name = name;
  s.req = req;
  s.st = state::creating;
  slots_.emplace(name, std::move(s));
  d.what = decision::kind::create;
  return d;
}

void session_pool::created(const std::string& name, std::string guest_id) {
  auto i = slots_.find(name);
  if (i == slots_.end() || i->second.st != state::creating) return;
  i->second.guest_id = std::move(guest_id);
  i->second.st = state::active;
}

void session_pool::create_failed(const std::string& name) {
  auto i = slots_.find(name);
  if (i != slots_.end() && i->second.st == state::creating) slots_.erase(i);
}

result<session_pool::slot> session_pool::release(const std::string& name, time_point now) {
  auto i = slots_.find(name);
  if (i == slots_.end() || i->second.st == state::deleting)
    return fail(ec::not_found, "no session " + name);
  auto& s = i->second;
  if (s.st == state::creating || s.st == state::stopping)
    return fail(ec::bad_request, "session " + name + " is being created, woken or stopped");
  if (s.st == state::active) {
    s.st = state::warm;
    s.released_at = now;
  }
  return s;
}

result<session_pool::slot> session_pool::begin_delete(const std::string& name) {
  auto i = slots_.find(name);
  if (i == slots_.end() || i->second.st == state::deleting)
    return fail(ec::not_found, "no session " + name);
  if (i->second.st == state::creating || i->second.st == state::stopping)
    return fail(ec::bad_request, "session " + name + " is being created, woken or stopped");
  i->second.st = state::deleting;
  return i->second;
}

void session_pool::deleted(const std::string& name) {
  auto i = slots_.find(name);
  if (i != slots_.end() && i->second.st == state::deleting) slots_.erase(i);
}

void session_pool::stopped(const std::string& name, bool ok, time_point now) {
  auto i = slots_.find(name);
  if (i == slots_.end() || i->second.st != state::stopping) return;
  if (!ok) {
    slots_.erase(i);
    return;
  }
  i->second.st = state::stopped;
  i->second.released_at = now;
}

std::vector<session_pool::slot> session_pool::expire(time_point now) {
  std::vector<slot> out;
  for (auto i = slots_.begin(); i != slots_.end();) {
    auto& s = i->second;
    if (s.st == state::stopped && opts_.retention.count() > 0 &&
        now - s.released_at >= opts_.retention) {
      i = slots_.erase(i);
      continue;
    }
    if (s.st == state::warm && opts_.idle_timeout.count() > 0 &&
        now - s.released_at >= opts_.idle_timeout) {
      s.st = state::stopping;
      out.push_back(s);
    }
    ++i;
  }
  return out;
}

std::optional<session_pool::time_point> session_pool::next_expiry() const {
  std::optional<time_point> next;
  auto consider = [&next](time_point at) {
    if (!next || at < *next) next = at;
  };
  for (auto& [n, s] : slots_) {
    if (s.st == state::warm && opts_.idle_timeout.count() > 0)
      consider(s.released_at + opts_.idle_timeout);
    if (s.st == state::stopped && opts_.retention.count() > 0)
      consider(s.released_at + opts_.retention);
  }
  return next;
}

const session_pool::slot* session_pool::find(const std::string& name) const {
  auto i = slots_.find(name);
  return i == slots_.end() ? nullptr : &i->second;
}

size_t session_pool::counted() const {
  size_t n = 0;
  for (auto& [name, s] : slots_)
    n += counts(s.st) ? 1 : 0;
  return n;
}

} // namespace guestflow
