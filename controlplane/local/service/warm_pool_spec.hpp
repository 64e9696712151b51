#pragma once

#include "messages/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// What the warm pool is asked to keep: `--warm-pool SPEC` / `GUESTFLOW_WARM_POOL=SPEC`.
namespace guestflow::local {

/// The pool a guest belongs to. Every pool guest is deny-all (no netns): that is the
/// runtime's default egress, and a guest without a netns can serve nothing else.
struct pool_key {
  std::string shape; ///< catalog id
  std::string image; ///< image name ("debian:12" when the spec names none)
  friend bool operator<(const pool_key& a, const pool_key& b) {
    return a.shape != b.shape ? a.shape < b.shape : a.image < b.image;
  }
  friend bool operator==(const pool_key& a, const pool_key& b) {
    return a.shape == b.shape && a.image == b.image;
  }
};

struct pool_target {
  pool_key key;
  uint32_t count = 0; ///< guests kept ready (never 0 in a parsed spec)
};

/// One pool's counts, as `GET /v1/pool` reports them.
struct pool_status {
  pool_key key;
  uint32_t target = 0;   ///< what the spec asks for (0: a pool being emptied)
  uint32_t ready = 0;    ///< built, never used, waiting for a create
  uint32_t creating = 0; ///< being built now
};

/// Targets in the order the spec names them; empty = no pool.
using warm_pool_spec = std::vector<pool_target>;

/// At most this many pool guests in all: each one holds a guest's memory until taken.
inline constexpr uint32_t max_warm_pool_guests = 64;

/// Reads `SHAPE[@IMAGE]=N[,SHAPE[@IMAGE]=N…]` (blanks around items ignored). Empty, all
/// blank, `0`, `off` and `none` mean no pool; an entry with N = 0 is dropped. bad_request,
/// naming `source` (the flag or the variable) and the entry, for a missing `=`, an unknown
/// shape, an image name that cannot be one, N not an integer, a key named twice, or more
/// than max_warm_pool_guests in all. Whether the image exists is the server's check (it
/// has the image store).
result<warm_pool_spec> parse_warm_pool_spec(std::string_view text, std::string_view source);

/// The canonical spelling (`s-1vcpu-256mb@debian:12=2`); "off" for no pool.
std::string to_string(const warm_pool_spec& spec);

/// The pool of a long-lived embedded host (`guestflow serve`) when GUESTFLOW_WARM_POOL is
/// unset: 2 guests of the runtime's default shape (s-1vcpu-256mb, debian:12) with at least
/// 4 GiB available, 1 with at least 2 GiB, none below (or when MemAvailable is unknown),
/// so that a small host never trades its headroom for latency.
warm_pool_spec default_host_warm_pool(std::optional<uint64_t> mem_available_mib);

/// /proc/meminfo's MemAvailable in MiB, or nullopt when it cannot be read.
std::optional<uint64_t> mem_available_mib();

} // namespace guestflow::local
