#pragma once

#include <string_view>

namespace guestflow::local {

/// The guest init for image roots (guest_init/init.cpp, a static executable of a few KiB),
/// compiled into the control plane.
std::string_view guest_init_image() noexcept;

} // namespace guestflow::local
