#pragma once

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace guestflow {

/// Immutable bytes that every holder shares: copying one is a reference count, never the
/// bytes. A whole-flow run uploads the embedded runner (~80 KB), which as a `std::string`
/// was copied into every run's spec, again into the upload message and held per run in
/// flight; as `shared_bytes` it is the binary's own copy from the spec down to the socket.
class shared_bytes {
public:
  shared_bytes() = default;
  /// Takes ownership of `s` (one allocation for the shared owner).
  shared_bytes(std::string s) // NOLINT: implicit, so call sites can pass a string
      : owner_(std::make_shared<const std::string>(std::move(s)))
      , view_(*owner_) {}
  shared_bytes(const char* s)
      : shared_bytes(std::string{s}) {} // NOLINT: implicit

  /// Bytes with static storage (compiled into the binary): shared without an owner.
  static shared_bytes of_static(std::string_view s) {
    shared_bytes b;
    b.view_ = s;
    return b;
  }

  std::string_view view() const noexcept { return view_; }
  const char* data() const noexcept { return view_.data(); }
  size_t size() const noexcept { return view_.size(); }
  bool empty() const noexcept { return view_.empty(); }

  friend bool operator==(const shared_bytes& a, const shared_bytes& b) {
    return a.view_ == b.view_;
  }
  friend bool operator!=(const shared_bytes& a, const shared_bytes& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const shared_bytes& b) {
    return os << b.view_;
  }

private:
  std::shared_ptr<const std::string> owner_;
  std::string_view view_;
};

/// Serialized as a string (only across a middleman; local messages share the bytes).
template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, shared_bytes& x) {
  std::string bytes{x.view()};
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x = shared_bytes{std::move(bytes)};
    return caf::none;
  });
  return f(bytes, load);
}

} // namespace guestflow
