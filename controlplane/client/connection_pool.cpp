#include "controlplane/client/connection_pool.hpp"

#include <iterator>

namespace guestflow::cp {

std::unique_ptr<connection> connection_pool::acquire() {
  auto now = std::chrono::steady_clock::now();
  for (;;) {
    std::unique_ptr<connection> c;
    {
      std::lock_guard<std::mutex> lock(mtx_);
      if (idle_.empty()) return nullptr;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    auto idle = now - c->idle_since;
    if (idle < idle_timeout_ && (idle < peek_after_ ? c->reusable() : c->looks_alive()))
      return c;
    c->close();
  }
}

void connection_pool::release(std::unique_ptr<connection> c) {
  if (!c) return;
  auto now = std::chrono::steady_clock::now();
  c->idle_since = now;
  std::vector<std::unique_ptr<connection>> doomed;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    // The oldest sit at the front; drop those idle too long so their sockets close.
    auto stale = idle_.begin();
    while (stale != idle_.end() && now - (*stale)->idle_since >= idle_timeout_)
      ++stale;
    std::move(idle_.begin(), stale, std::back_inserter(doomed));
    idle_.erase(idle_.begin(), stale);
    if (!closed_ && idle_.size() < max_idle_) idle_.push_back(std::move(c));
  }
  if (c) doomed.push_back(std::move(c));
  for (auto& d : doomed)
    d->close();
}

void connection_pool::close_all() {
  std::vector<std::unique_ptr<connection>> doomed;
  {
    std::lock_guard<std::mutex> lock(mtx_);
    closed_ = true;
    doomed.swap(idle_);
  }
  for (auto& c : doomed)
    c->close();
}

size_t connection_pool::idle() const {
  std::lock_guard<std::mutex> lock(mtx_);
  return idle_.size();
}

} // namespace guestflow::cp
