#include "actors/admission.hpp"

#include <algorithm>

namespace guestflow {

admission::verdict admission::offer(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.size() < max_inflight_ && queue_.empty()) {
    inflight_.insert(id);
    return verdict::start;
  }
  if (queue_.size() < max_queued_) {
    queue_.push_back(id);
    return verdict::queued;
  }
  return verdict::refused;
}

bool admission::take(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.size() >= max_inflight_ || !queue_.empty()) return false;
  inflight_.insert(id);
  return true;
}

std::vector<std::string> admission::release(const std::string& id) {
  std::lock_guard<std::mutex> guard{mu_};
  if (inflight_.erase(id) == 0) {
    auto i = std::find(queue_.begin(), queue_.end(), id);
    if (i != queue_.end()) queue_.erase(i);
  }
  std::vector<std::string> started;
  while (inflight_.size() < max_inflight_ && !queue_.empty()) {
    inflight_.insert(queue_.front());
    started.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return started;
}

bool admission::full() const {
  std::lock_guard<std::mutex> guard{mu_};
  return inflight_.size() >= max_inflight_ || !queue_.empty();
}

bool admission::full_with_queue() const {
  std::lock_guard<std::mutex> guard{mu_};
  return (inflight_.size() >= max_inflight_ || !queue_.empty()) && queue_.size() >= max_queued_;
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
