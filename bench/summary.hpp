#pragma once

#include "messages/error.hpp"

#include <algorithm>
#include <future>
#include <memory>
#include <vector>

/// Small tools every bench needs alike.
namespace guestflow::bench {

/// The q-quantile (0..1) of `v`, nearest rank; 0 for no samples.
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5))];
}

/// Blocks on a callback-style call (`start(callback)`, e.g. a control-plane client's) and
/// returns what the callback was given. The call must answer: its own deadline bounds this.
template<class T, class Start>
result<T> await(Start&& start) {
  auto p = std::make_shared<std::promise<result<T>>>();
  auto fut = p->get_future();
  start([p](result<T> r) { p->set_value(std::move(r)); });
  return fut.get();
}

} // namespace guestflow::bench
