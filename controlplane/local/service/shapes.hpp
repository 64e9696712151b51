#pragma once

#include "messages/sandbox.hpp"

#include <optional>
#include <string_view>

/// The local control plane's catalog: the CreateOS shape ids with the same memory, plus one
/// local-only shape. vCPUs are reported, not enforced (guests share the host's cores);
/// memory and disk (`default_disk_mib`: the workspace's size, enforced by the kernel) are.
namespace guestflow::local {

/// Every shape, ordered by size. `s-1vcpu-64mb` is local-only: it exists so that tests can
/// hit the memory limit cheaply; CreateOS does not offer it.
const shape_list& shape_catalog();

/// The catalog entry named `id`, or nullopt.
std::optional<shape> find_shape(std::string_view id);

/// The catalog entry named `id`, or a bad_request failure listing the valid ids.
result<shape> resolve_shape(std::string_view id);

/// The default root layout.
inline constexpr std::string_view default_rootfs = "debian:12";

/// `rootfs` (absent → debian:12) if it is debian:12, else bad_request: the simulated domain
/// has no image store (the real one resolves images through image_store.hpp).
result<std::string> resolve_rootfs(const std::optional<std::string>& rootfs);

} // namespace guestflow::local
