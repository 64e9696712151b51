#pragma once

#include "messages/error.hpp"

#include <string>
#include <string_view>

namespace guestflow {

/// RFC 4648 base64 with padding: how returned files travel inside a JSON answer.
std::string base64_encode(std::string_view bytes);
/// Strict RFC 4648 base64 back to bytes (padding required, no whitespace): bad_request
/// naming the length or the offset when malformed.
result<std::string> base64_decode(std::string_view text);

} // namespace guestflow
