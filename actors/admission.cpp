#include "actors/admission.hpp"

#include <algorithm>

namespace guestflow {

admission::verdict admission::offer(const std::string& id) {
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

std::vector<std::string> admission::release(const std::string& id) {
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

} // namespace guestflow
