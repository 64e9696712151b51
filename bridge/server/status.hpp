#pragma once

#include "messages/error.hpp"

namespace guestflow::bridge {

/// The HTTP status an error code answers with (bridge/API.md's table).
unsigned http_status(ec code) noexcept;

} // namespace guestflow::bridge
