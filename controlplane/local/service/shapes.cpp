#include "controlplane/local/service/shapes.hpp"

namespace guestflow::local {

const shape_list& shape_catalog() {
  static const shape_list catalog = [] {
    shape_list l;
    // default_disk_mib: the size of the guest's /workspace, a file system of its own the
    // kernel bounds (guests/workspace_disk.hpp), with one inode per 16 KiB of it. For a
    // disposable guest a cap, not a reservation (a sparse image; lost writes are reported
    // after each exec); a persistent guest's blocks are allocated at create. 4x the memory,
    // 256 MiB to 16 GiB, so that a local host's disk outlasts a few runaway guests.
    l.data = {
        {"s-1vcpu-64mb", 1, 64, 256}, // local-only (OOM tests)
        {"s-1vcpu-256mb", 1, 256, 1024},   {"s-1vcpu-512mb", 1, 512, 2048},
        {"s-1vcpu-1gb", 1, 1024, 4096},    {"s-2vcpu-2gb", 2, 2048, 8192},
        {"s-2vcpu-4gb", 2, 4096, 16384},   {"s-4vcpu-8gb", 4, 8192, 16384},
        {"s-4vcpu-16gb", 4, 16384, 16384},
    };
    l.total = l.data.size();
    return l;
  }();
  return catalog;
}

std::optional<shape> find_shape(std::string_view id) {
  for (const auto& s : shape_catalog().data)
    if (s.id == id) return s;
  return std::nullopt;
}

result<shape> resolve_shape(std::string_view id) {
  if (auto s = find_shape(id)) return *s;
  std::string ids;
  for (const auto& s : shape_catalog().data)
    ids += (ids.empty() ? "" : ", ") + s.id;
  return fail(ec::bad_request,
              "shape: unknown shape '" + std::string{id} + "'; use one of " + ids);
}

result<std::string> resolve_rootfs(const std::optional<std::string>& rootfs) {
  if (!rootfs || *rootfs == default_rootfs) return std::string{default_rootfs};
  return fail(ec::bad_request,
              "rootfs: unknown rootfs '" + *rootfs +
                  "'; this control plane offers only debian:12 (the host's /usr)");
}

} // namespace guestflow::local
