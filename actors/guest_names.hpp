#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>

/// Guest names are the runtime's only durable bookkeeping: `gf-<kind>-<owner6>-<rand10>`
/// (22 chars, the CreateOS limit) says which runtime owns an ephemeral guest, so a sweep
/// after a crash deletes its own guests and never another runtime's.
namespace guestflow::names {

/// `b` sandbox backend, `x` executor, `c` reusable component.
enum class guest_kind : char { backend = 'b', executor = 'x', component = 'c' };

/// 6 chars of [a-z0-9]: `GUESTFLOW_OWNER` if set (normalized), else a hash of host name and
/// state dir — stable across restarts of one runtime, different between two runtimes.
std::string owner_id(std::string_view env_owner, std::string_view host_name,
                     std::string_view state_dir);

/// A fresh ephemeral name for `owner` (10 random [a-z0-9]).
std::string ephemeral(guest_kind kind, std::string_view owner, std::mt19937_64& rng);

/// The parts of an ephemeral name, or nullopt if `name` is not one of ours at all.
struct parsed_name {
  guest_kind kind;
  std::string owner;
};
std::optional<parsed_name> parse(std::string_view name);

/// The deterministic name of a reusable component guest: `gf-c-` + 17 base36 chars of a
/// 128-bit FNV-1a over (flow id, component id, egress fingerprint) — 22 chars. The network
/// policy is part of the identity, so a run with different egress never adopts this guest.
/// Never of the ephemeral form (no '-' at index 11), so parse() and every sweep of
/// ephemeral guests leave it alone; it carries no owner: any runtime may adopt it.
std::string reusable(std::string_view flow_id, std::string_view component_id,
                     std::string_view egress_fingerprint);

/// True for a name reusable() can produce.
bool is_reusable(std::string_view name);

} // namespace guestflow::names
