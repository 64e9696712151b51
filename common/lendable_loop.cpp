#include "common/lendable_loop.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

namespace guestflow {
namespace {

/// Identifies the calling thread (the address of a thread-local).
const void* this_thread_key() {
  static thread_local char key;
  return &key;
}

/// The loops lent so far (weak: an owner that is gone unlists itself by reclaiming).
struct listing {
  std::mutex mtx;
  std::vector<std::weak_ptr<lendable_loop>> loops; ///< guarded by mtx
  std::atomic<int> free{0}; ///< loops owned, listed and not reclaimed (a hint)
};

listing& listed() {
  static listing l;
  return l;
}

/// Drops the listing's entries of owners that are gone, and `gone` (may be null).
void unlist(listing& l, const lendable_loop* gone) {
  std::lock_guard<std::mutex> guard{l.mtx};
  l.loops.erase(std::remove_if(l.loops.begin(), l.loops.end(),
                               [gone](auto& w) {
                                 auto p = w.lock();
                                 return !p || p.get() == gone;
                               }),
                l.loops.end());
}

/// How long a borrower waits for the owner's thread to step aside (it finishes the handler
/// it is in, or leaves epoll_wait on the wake-up: microseconds) before it gives up for now.
constexpr auto handover_wait = std::chrono::milliseconds{2};

} // namespace

void lendable_loop::lend(const std::shared_ptr<lendable_loop>& loop) {
  auto& l = listed();
  std::lock_guard<std::mutex> guard{l.mtx};
  l.loops.push_back(loop);
  l.free.fetch_add(1);
}

bool lendable_loop::any_to_borrow() noexcept {
  return listed().free.load(std::memory_order_relaxed) > 0;
}

std::shared_ptr<lendable_loop> lendable_loop::borrow() {
  auto& l = listed();
  std::shared_ptr<lendable_loop> got;
  unlist(l, nullptr);
  {
    std::lock_guard<std::mutex> guard{l.mtx};
    for (auto& w : l.loops) {
      auto loop = w.lock();
      if (!loop) continue;
      std::lock_guard<std::mutex> g{loop->mtx_};
      if (loop->state_ != state::owned || loop->reclaimed_) continue;
      loop->state_ = state::claimed;
      l.free.fetch_sub(1);
      got = std::move(loop);
      break;
    }
  }
  if (!got) return nullptr;
  got->nudge(); // the owner's thread may sleep in run_one: it hands over after it
  std::unique_lock<std::mutex> lock{got->mtx_};
  if (got->cv_.wait_for(lock, handover_wait, [&] { return got->state_ != state::claimed; }) &&
      got->state_ == state::borrowed)
    return got;
  if (got->state_ == state::claimed) { // the owner's thread is busy: leave it its loop
    got->state_ = state::owned;
    if (!got->reclaimed_) l.free.fetch_add(1);
  }
  return nullptr;
}

void lendable_loop::owner_turn() {
  std::unique_lock<std::mutex> lock{mtx_};
  if (state_ == state::claimed) {
    state_ = state::borrowed;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return state_ != state::borrowed; });
}

void lendable_loop::reclaim() {
  auto& l = listed();
  unlist(l, this);
  std::unique_lock<std::mutex> lock{mtx_};
  if (reclaimed_) return;
  reclaimed_ = true;
  if (state_ == state::owned) {
    l.free.fetch_sub(1);
    return;
  }
  if (state_ == state::claimed) { // the borrower waiting for it gives up
    state_ = state::owned;
    cv_.notify_all();
    return;
  }
  if (!inside_) {
    state_ = state::owned;
    cv_.notify_all();
    return;
  }
  if (inside_thread_ == this_thread_key()) return; // leave() hands it back
  wake(); // under the lock: the owner is alive (it is calling)
  cv_.wait(lock, [&] { return state_ == state::owned; });
}

bool lendable_loop::enter() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (reclaimed_ || state_ != state::borrowed || inside_) return false;
  inside_ = true;
  inside_thread_ = this_thread_key();
  return true;
}

void lendable_loop::leave() {
  std::lock_guard<std::mutex> guard{mtx_};
  inside_ = false;
  inside_thread_ = nullptr;
  if (reclaimed_ && state_ == state::borrowed) {
    state_ = state::owned;
    cv_.notify_all();
  }
}

void lendable_loop::give_back() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (state_ != state::borrowed) return;
  state_ = state::owned;
  if (!reclaimed_) listed().free.fetch_add(1);
  cv_.notify_all();
}

void lendable_loop::nudge() {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!reclaimed_) wake();
}

bool lendable_loop::borrowed_here() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return inside_ && inside_thread_ == this_thread_key();
}

bool lendable_loop::borrowed() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return state_ == state::borrowed;
}

} // namespace guestflow
