#include "actors/event_log.hpp"

namespace guestflow {

const run_event& event_log::append(run_event e, const std::string& run_id) {
  e.run_id = run_id;
  e.seq = next();
  auto bytes = encode(e).size() + 1; // the NDJSON line with its '\n'
  events_.push_back({caf_bridge::shared_message<run_event>{std::move(e)}, bytes});
  bytes_ += bytes;
  while (bytes_ > max_bytes_ && events_.size() > 1) {
    bytes_ -= events_.front().bytes;
    events_.pop_front();
    ++first_;
  }
  return events_.back().event.get();
}

} // namespace guestflow
