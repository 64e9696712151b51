#include "messages/error.hpp"

#include <array>

namespace guestflow {
namespace {

constexpr std::array<std::string_view, 14> ec_names{
    "bad_request", "policy_refused", "unavailable",        "transient", "paused",
    "not_found",   "egress_drift",   "artifact_too_large", "timeout",   "oom",
    "capacity",    "guest_failed",   "cancelled",          "killed",
};

static_assert(ec_names.size() == static_cast<size_t>(last_ec), "one name per code");

} // namespace

std::string_view to_string(ec x) noexcept {
  auto i = static_cast<size_t>(x) - 1;
  return i < ec_names.size() ? ec_names[i] : std::string_view{"unknown"};
}

std::optional<ec> ec_from_string(std::string_view name) noexcept {
  for (size_t i = 0; i < ec_names.size(); ++i)
    if (ec_names[i] == name) return static_cast<ec>(i + 1);
  return std::nullopt;
}

} // namespace guestflow
