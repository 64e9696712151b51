#include "actors/admission.hpp"

#include <algorithm>

namespace guestflow {

admission::verdict admission::offer(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.size() < max_inflight_ && queue_.empty()) {
    inflight_.insert(id);
    return verdict::start;
  }
  if (queue_.size() < max_queued_ + draining_.size()) {
    queue_.push_back(id);
    return verdict::queued;
  }
  return verdict::refused;
}

admission::verdict admission::take_or_wait(const std::string& id,
                                           std::function<void()> on_start) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.size() < max_inflight_ && queue_.empty()) {
    inflight_.insert(id);
    return verdict::start;
  }
  if (queue_.size() >= draining_.size()) return verdict::refused;
  queue_.push_back(id);
  waiters_.emplace(id, std::move(on_start));
  return verdict::queued;
}

void admission::draining(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.count(id)) draining_.insert(id);
}

bool admission::take(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.size() >= max_inflight_ || !queue_.empty()) return false;
  inflight_.insert(id);
  return true;
}

std::vector<std::string> admission::release(const std::string& id) {
  std::vector<std::string> started;
  std::vector<std::function<void()>> waiters;
  {
    std::lock_guard<std::mutex> guard{mu_};
    draining_.erase(id);
    if (inflight_.erase(id) == 0) {
      auto i = std::find(queue_.begin(), queue_.end(), id);
      if (i != queue_.end()) queue_.erase(i);
      waiters_.erase(id);
    }
    while (inflight_.size() < max_inflight_ && !queue_.empty()) {
      inflight_.insert(queue_.front());
      if (auto w = waiters_.find(queue_.front()); w != waiters_.end()) {
        waiters.push_back(std::move(w->second));
        waiters_.erase(w);
      } else {
        started.push_back(std::move(queue_.front()));
      }
      queue_.pop_front();
    }
  }
  for (auto& w : waiters)
    w();
  return started;
}

bool admission::full() const {
  std::lock_guard<std::mutex> guard{mu_};
  return (inflight_.size() >= max_inflight_ || !queue_.empty()) &&
         queue_.size() >= draining_.size();
}

bool admission::full_with_queue() const {
  std::lock_guard<std::mutex> guard{mu_};
  return (inflight_.size() >= max_inflight_ || !queue_.empty()) &&
         queue_.size() >= max_queued_ + draining_.size();
}

uint64_t admission::inflight() const {
  std::lock_guard<std::mutex> guard{mu_};
  return inflight_.size();
}

uint64_t admission::queued() const {
  std::lock_guard<std::mutex> guard{mu_};
  return queue_.size();
}

} // namespace guestflow
