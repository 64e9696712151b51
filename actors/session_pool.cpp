#include "actors/session_pool.hpp"

#include <algorithm>

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
  return a.image == b.image && a.allow_network == b.allow_network && a.mounts == b.mounts &&
         a.memory_mib == b.memory_mib && a.cpus == b.cpus;
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

result<shape> session_shape(const shape_list& catalog, std::optional<uint64_t> memory_mib,
                            std::optional<uint32_t> cpus, uint64_t floor_mib,
                            const std::optional<std::string>& pinned,
                            std::optional<uint64_t> max_memory_mib) {
  auto mem = std::max(memory_mib.value_or(0), floor_mib);
  auto cpu = cpus.value_or(1);
  auto fits = [&](const shape& s) { return s.mem_mib >= mem && s.vcpu >= cpu; };
  auto asked = [&] {
    std::string out;
    if (memory_mib) out = "memory_mib: " + std::to_string(*memory_mib);
    if (cpus) out += (out.empty() ? "" : ", ") + std::string{"cpus: "} + std::to_string(cpu);
    return out;
  };
  auto of = [](const shape& s) {
    return s.id + " (" + std::to_string(s.mem_mib) + " MiB, " + std::to_string(s.vcpu) +
           " vCPU)";
  };
  const shape* best = nullptr;
  if (pinned) {
    for (auto& s : catalog.data)
      if (s.id == *pinned) best = &s;
    if (!best)
      return fail(ec::bad_request, "the server's pinned shape '" + *pinned +
                                       "' is not in the control plane's catalog");
    if (!fits(*best))
      return fail(ec::policy_refused, asked() + " does not fit the shape the server pins, " +
                                          of(*best) + " (GUESTFLOW_SHAPE)");
  } else {
    const shape *most_mem = nullptr, *most_cpu = nullptr;
    for (auto& s : catalog.data) {
      if (fits(s) && (!best || s.mem_mib < best->mem_mib ||
                      (s.mem_mib == best->mem_mib && s.vcpu < best->vcpu)))
        best = &s;
      if (!most_mem || s.mem_mib > most_mem->mem_mib) most_mem = &s;
      if (!most_cpu || s.vcpu > most_cpu->vcpu) most_cpu = &s;
    }
    if (!best) {
      if (!most_mem) return fail(ec::bad_request, "the control plane's shape catalog is empty");
      if (memory_mib && most_mem->mem_mib < mem)
        return fail(ec::bad_request, "memory_mib: " + std::to_string(*memory_mib) +
                                         " is more than the largest shape has, " +
                                         of(*most_mem));
      if (most_cpu->vcpu < cpu)
        return fail(ec::bad_request, "cpus: " + std::to_string(cpu) +
                                         " is more than the largest shape has, " +
                                         of(*most_cpu));
      return fail(ec::bad_request,
                  asked() + ": no shape has both (largest: " + of(*most_mem) + ")");
    }
  }
  if (max_memory_mib && best->mem_mib > *max_memory_mib) {
    auto limit = "the server's maximum of " + std::to_string(*max_memory_mib) +
                 " MiB (GUESTFLOW_SESSION_MAX_MEMORY_MIB)";
    if (memory_mib && *memory_mib > *max_memory_mib)
      return fail(ec::policy_refused,
                  "memory_mib: " + std::to_string(*memory_mib) + " is over " + limit);
    return fail(ec::policy_refused, asked() + " needs shape " + of(*best) + ", over " + limit);
  }
  return *best;
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
                                       " exists with another image, network policy, mounts, "
                                       "memory_mib or cpus; delete it first"};
      return d;
    }
    if (s.st != state::stopped) {
      s.st = state::active;
      s.req.thread_dir = req.thread_dir;
      s.req.idle_timeout_seconds = req.idle_timeout_seconds;
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
    auto idle = idle_timeout(s);
    if (s.st == state::warm && idle.count() > 0 && now - s.released_at >= idle) {
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
    if (s.st == state::warm && idle_timeout(s).count() > 0)
      consider(s.released_at + idle_timeout(s));
    if (s.st == state::stopped && opts_.retention.count() > 0)
      consider(s.released_at + opts_.retention);
  }
  return next;
}

std::chrono::seconds session_pool::idle_timeout(const slot& s) const {
  if (s.req.idle_timeout_seconds) return std::chrono::seconds{*s.req.idle_timeout_seconds};
  return opts_.idle_timeout;
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
