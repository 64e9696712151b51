#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace guestflow {

/// The one error vocabulary of guestflow (DESIGN.md "Errors"). Every layer maps its
/// failures onto these codes the same way; the string names are part of the wire API.
enum class ec : uint8_t {
  bad_request = 1,    ///< caller input is malformed or invalid; nothing changed
  policy_refused,     ///< the policy gate refused the run (fail closed)
  unavailable,        ///< a configured provider cannot be used; never falls back in-process
  transient,          ///< 429 / 5xx / timeouts; retried where the call is idempotent
  paused,             ///< the guest is paused (control plane 409 "sandbox is paused")
  not_found,          ///< no such guest, run or file
  egress_drift,       ///< a guest's live egress differs from what its identity promises
  artifact_too_large, ///< returned files exceeded the cap during transfer
  timeout,            ///< guest code ran past its limit (exit -1)
  oom,                ///< guest hit its memory limit (exit 137)
  capacity,           ///< no host or the admission queue is full
  guest_failed,       ///< the guest or its runner failed
  cancelled,          ///< the caller cancelled the run (Ctrl-C, DELETE, aclose)
  /// guest code died of SIGKILL (exit 137) that was neither its time limit nor a memory
  /// cgroup OOM kill (it killed itself, or its timeout(1) parent)
  killed,
};

/// The last code: new codes go after it, and this moves with them.
inline constexpr ec last_ec = ec::killed;

/// Stable wire name of `x` ("bad_request", ...).
std::string_view to_string(ec x) noexcept;

/// Parses a wire name; nullopt for anything unknown.
std::optional<ec> ec_from_string(std::string_view name) noexcept;

/// An error code with a human-readable message that says what to change.
struct failure {
  ec code = ec::bad_request;
  std::string message;

  friend bool operator==(const failure& a, const failure& b) {
    return a.code == b.code && a.message == b.message;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, failure& x) {
  return f(x.code, x.message);
}

/// A value or a typed failure. Decoders and domain classes return this instead of throwing.
template<class T>
class result {
public:
  result(T value)
      : v_(std::move(value)) {}
  result(failure err)
      : v_(std::move(err)) {}

  explicit operator bool() const noexcept { return v_.index() == 0; }
  bool ok() const noexcept { return v_.index() == 0; }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }

  const failure& error() const& { return std::get<1>(v_); }
  failure&& error() && { return std::get<1>(std::move(v_)); }

private:
  std::variant<T, failure> v_;
};

/// Shorthand for building a failure.
inline failure fail(ec code, std::string message) {
  return failure{code, std::move(message)};
}

} // namespace guestflow
