#pragma once

#include "controlplane/local/guests/sandbox_launch.hpp"
#include "messages/egress.hpp"
#include "messages/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

/// What the warm pool is asked to keep: `--warm-pool SPEC` / `GUESTFLOW_WARM_POOL=SPEC`.
namespace guestflow::local {

/// The pool a guest belongs to: everything that shapes a guest at create — its shape, its
/// image, its network policy (a guest with egress is built with its netns and nftables
/// rules, exactly as a create builds them), what its python waiter imported ahead and its
/// isolation (a gVisor create never gets a namespaces guest, nor the other way round). A
/// pool serves a create only when all five are equal.
struct pool_key {
  std::string shape;                                ///< catalog id
  std::string image;                                ///< image name ("debian:12" by default)
  egress_policy egress = egress_policy::deny_all(); ///< compared by fingerprint()
  /// What the waiter preloads: the image's declared preload, comma-joined (preload_of());
  /// opaque to the pool. Never named in a spec: read from the image store.
  std::string preload;
  guest_isolation isolation = guest_isolation::namespaces;

  friend bool operator<(const pool_key& a, const pool_key& b) {
    return std::forward_as_tuple(a.shape, a.image, a.preload, a.isolation) !=
                   std::forward_as_tuple(b.shape, b.image, b.preload, b.isolation)
               ? std::forward_as_tuple(a.shape, a.image, a.preload, a.isolation) <
                     std::forward_as_tuple(b.shape, b.image, b.preload, b.isolation)
               : fingerprint(a.egress) < fingerprint(b.egress);
  }
  friend bool operator==(const pool_key& a, const pool_key& b) {
    return a.shape == b.shape && a.image == b.image && a.preload == b.preload &&
           a.isolation == b.isolation && a.egress == b.egress;
  }
  friend bool operator!=(const pool_key& a, const pool_key& b) { return !(a == b); }
};

/// `SHAPE@IMAGE` plus `#EGRESS` when not deny-all and `+gvisor` for a gVisor pool (the
/// spec's spelling of a key), for logs and refusals.
std::string to_string(const pool_key& key);

/// One pool: kept between `count` (the floor: what it holds with no demand) and `cap`; in
/// between, its size follows demand (warm_pool). `SHAPE=N` is a fixed pool (count = cap).
struct pool_target {
  pool_key key;
  uint32_t count = 0; ///< the floor (may be 0 in a demand-sized pool)
  uint32_t cap = 0;   ///< never 0 in a parsed spec; >= count
  /// A default the server drops (with a warning) when its image is not in the store,
  /// rather than refusing to start: the executor's pool of `guestflow serve`.
  bool optional = false;
};

/// One pool's counts, as `GET /v1/pool` and `GET /metrics` report them.
struct pool_status {
  pool_key key;
  uint32_t target = 0;   ///< what the pool aims at now (demand within floor..cap; 0: emptied)
  uint32_t ready = 0;    ///< built, never used, waiting for a create
  uint32_t creating = 0; ///< being built now
  uint32_t floor = 0;
  uint32_t cap = 0;
  uint64_t takes = 0;   ///< creates it served since start
  uint64_t misses = 0;  ///< creates of its key that found it empty and built their own
  uint64_t evicted = 0; ///< ready guests deleted to make room for a create (on loan)
  uint64_t fills = 0;   ///< guests built
  uint64_t fill_ms = 0; ///< their build time together (mean: fill_ms / fills)
};

/// Targets in the order the spec names them; empty = no pool.
using warm_pool_spec = std::vector<pool_target>;

/// At most this many pool guests in all: each one holds a guest's memory until taken.
inline constexpr uint32_t max_warm_pool_guests = 64;

/// Reads `KEY=N` or `KEY=MIN..MAX`, comma-separated (blanks around items ignored), where
/// KEY is `SHAPE[@IMAGE][#EGRESS][+ISOLATION]`: EGRESS `none` (the default: deny-all), `*`
/// (allow all, what allow_network asks for) or rules as the create API spells them joined
/// by `|` (`10.0.0.0/8:443|1.2.3.4`); ISOLATION `namespaces` (the default) or `gvisor`. `=N`
/// keeps N (floor = cap = N); `=MIN..MAX` sizes the pool from demand between them. Empty, all
/// blank, `0`, `off` and `none` mean no pool; an entry whose cap is 0 is dropped. bad_request,
/// naming `source` (the flag or the variable) and the entry, for a missing `=`, an unknown
/// shape, an image name that cannot be one, a bad egress rule, an unknown isolation, N not an
/// integer or MIN > MAX, a key named twice, or more than max_warm_pool_guests in all (caps
/// summed). Whether the image exists is the server's check (it has the image store); a gVisor
/// pool on a host without runsc warns at each failed build.
result<warm_pool_spec> parse_warm_pool_spec(std::string_view text, std::string_view source);

/// The canonical spelling (`s-1vcpu-256mb@debian:12=2`, `s-1vcpu-1gb@debian:12#*=1..4`,
/// `s-1vcpu-256mb@debian:12+gvisor=1`);
/// "off" for no pool.
std::string to_string(const warm_pool_spec& spec);

/// The pool of a long-lived embedded host (`guestflow serve`) when GUESTFLOW_WARM_POOL is
/// unset, for the runtime's default sandbox guest (s-1vcpu-256mb, debian:12, deny-all):
/// 2..8 guests with at least 4 GiB available, 1..4 with at least 2 GiB, none below (or
/// when MemAvailable is unknown), so that a small host never trades its headroom for
/// latency.
warm_pool_spec default_host_warm_pool(std::optional<uint64_t> mem_available_mib);

/// The pool a long-lived host keeps for its whole-flow executor's guest (`key`: the
/// executor's shape, image and egress): 1..N, N the guests of that shape half of
/// MemAvailable holds, at most 8; none below 2 GiB available, when unknown, or when half
/// of it does not hold one guest.
std::optional<pool_target> default_executor_pool(pool_key key,
                                                 std::optional<uint64_t> mem_available_mib);

/// /proc/meminfo's MemAvailable in MiB, or nullopt when it cannot be read.
std::optional<uint64_t> mem_available_mib();

} // namespace guestflow::local
