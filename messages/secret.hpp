#pragma once

#include <string_view>

namespace guestflow {

/// Compares an offered secret (API key, bearer token) with the configured one in time
/// independent of where they differ (no early exit), so response timing leaks nothing.
bool same_secret(std::string_view offered, std::string_view expected) noexcept;

} // namespace guestflow
