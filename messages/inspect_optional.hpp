#pragma once

// CAF 0.17 serializes caf::optional but not std::optional, which the message types use.
// These overloads mirror caf/optional.hpp for std::optional. They live in namespace caf so
// that argument-dependent lookup finds them through CAF's serializer types.

#include <optional>
#include <type_traits>
#include <utility>

namespace caf {

template<class Inspector, class T>
typename std::enable_if<Inspector::reads_state, typename Inspector::result_type>::type
inspect(Inspector& f, std::optional<T>& x) {
  return x ? f(true, *x) : f(false);
}

template<class T>
struct std_optional_inspect_helper {
  bool& enabled;
  T& storage;
  template<class Inspector>
  friend typename Inspector::result_type inspect(Inspector& f, std_optional_inspect_helper& x) {
    return x.enabled ? f(x.storage) : f();
  }
};

template<class Inspector, class T>
typename std::enable_if<Inspector::writes_state, typename Inspector::result_type>::type
inspect(Inspector& f, std::optional<T>& x) {
  bool flag = false;
  T tmp{};
  std_optional_inspect_helper<T> helper{flag, tmp};
  auto res = f(flag, helper);
  if (flag)
    x = std::move(tmp);
  else
    x.reset();
  return res;
}

} // namespace caf
