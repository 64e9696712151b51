#pragma once

#include <string>
#include <string_view>

namespace guestflow {

/// RFC 4648 base64 with padding: how returned files travel inside a JSON answer.
std::string base64_encode(std::string_view bytes);

} // namespace guestflow
