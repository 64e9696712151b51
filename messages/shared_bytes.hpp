#pragma once

#include <array>
#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

namespace guestflow {

/// Immutable bytes that every holder shares: copying one is a reference count, never the
/// bytes. A whole-flow run uploads the embedded runner (~23 KB gzipped), which as a
/// `std::string` was copied into every run's spec, again into the upload message and held
/// per run in flight; as `shared_bytes` it is the binary's own copy from the spec down to
/// the socket. A value may be two pieces, a shared head and its own tail (`joined`), so a
/// run's bundle is the bytes every run shares followed by its own spec, never one copy of
/// both; a reader takes `pieces()` (the socket writes them as they are) or a copy (`str`).
class shared_bytes {
public:
  shared_bytes() = default;
  /// Takes ownership of `s` (one allocation for the shared owner).
  shared_bytes(std::string s) // NOLINT: implicit, so call sites can pass a string
      : owner_(std::make_shared<const std::string>(std::move(s)))
      , tail_(*owner_) {}
  shared_bytes(const char* s)
      : shared_bytes(std::string{s}) {} // NOLINT: implicit

  /// Bytes with static storage (compiled into the binary): shared without an owner.
  static shared_bytes of_static(std::string_view s) {
    shared_bytes b;
    b.tail_ = s;
    return b;
  }

  /// `head`'s bytes (shared, not copied) followed by `tail` (taken over).
  static shared_bytes joined(const shared_bytes& head, std::string tail) {
    if (!head.head_.empty()) // a joined head (rare): its two pieces as one
      return joined(shared_bytes{head.str()}, std::move(tail));
    shared_bytes b{std::move(tail)};
    b.head_owner_ = head.owner_;
    b.head_ = head.tail_;
    return b;
  }

  /// The bytes in order, as at most two pieces (the first may be empty).
  std::array<std::string_view, 2> pieces() const noexcept { return {head_, tail_}; }
  size_t size() const noexcept { return head_.size() + tail_.size(); }
  bool empty() const noexcept { return head_.empty() && tail_.empty(); }
  /// A copy of all the bytes in one string (tests, serialization).
  std::string str() const {
    std::string out;
    out.reserve(size());
    out.append(head_.data(), head_.size()).append(tail_.data(), tail_.size());
    return out;
  }

  friend bool operator==(const shared_bytes& a, const shared_bytes& b) {
    if (a.head_.empty() && b.head_.empty()) return a.tail_ == b.tail_;
    return a.size() == b.size() && a.str() == b.str();
  }
  friend bool operator!=(const shared_bytes& a, const shared_bytes& b) { return !(a == b); }
  friend std::ostream& operator<<(std::ostream& os, const shared_bytes& b) {
    return os << b.head_ << b.tail_;
  }

private:
  std::shared_ptr<const std::string> head_owner_; ///< null: none, or static storage
  std::string_view head_;
  std::shared_ptr<const std::string> owner_; ///< null: empty, or static storage
  std::string_view tail_;
};

/// Serialized as a string (only across a middleman; local messages share the bytes).
template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, shared_bytes& x) {
  std::string bytes = x.str();
  auto load = caf::meta::load_callback([&]() -> caf::error {
    x = shared_bytes{std::move(bytes)};
    return caf::none;
  });
  return f(bytes, load);
}

} // namespace guestflow
