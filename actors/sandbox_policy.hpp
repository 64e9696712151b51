#pragma once

#include "controlplane/client/endpoint_selection.hpp"
#include "messages/egress.hpp"
#include "messages/error.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

/// The policy gate and shape choice for the sandbox-backend surface, with Langflow's
/// sandbox settings and their meaning (configuration, shapes, network semantics).
namespace guestflow::policy {

using env_map = cp::env_map;

/// Which control plane answers, and what it can and cannot enforce.
struct provider_info {
  cp::provider kind = cp::provider::local;
  capabilities caps;
  uint64_t memory_floor_mib = 256;           ///< CreateOS 4096, local configurable
  std::optional<std::string> default_rootfs; ///< CreateOS "devbox:1"; local: none
};

/// CreateOS as measured (cp::createos_capabilities) with its 4096 MiB floor:
/// a fresh guest importing numpy or pandas needs it.
provider_info createos_provider();

/// Langflow's `LANGFLOW_SANDBOX_*` settings plus the provider's own.
struct sandbox_settings {
  uint32_t timeout_seconds = 30; ///< LANGFLOW_SANDBOX_TIMEOUT_SECONDS
  uint64_t memory_mb = 192;      ///< LANGFLOW_SANDBOX_MEMORY_MB (a floor, not the size)
  bool allow_network = false;    ///< LANGFLOW_SANDBOX_ALLOW_NETWORK
  std::vector<std::string> allowed_domains; ///< LANGFLOW_SANDBOX_ALLOWED_DOMAINS (refused)
  bool accept_egress_exceptions = false; ///< LANGFLOW_SANDBOX_CREATEOS_ACCEPT_EGRESS_EXCEPTIONS
  std::optional<std::string> rootfs;     ///< CREATEOS_SANDBOX_ROOTFS
  std::optional<std::string> pinned_shape; ///< CREATEOS_SANDBOX_SHAPE / GUESTFLOW_SHAPE
  /// GUESTFLOW_ISOLATION: "namespaces" | "gvisor"; a run is refused where the provider does
  /// not offer it (never given a weaker guest).
  std::optional<std::string> isolation;
  /// GUESTFLOW_CREATEOS_PUBLIC_INGRESS: CreateOS's ingress URLs are public (no
  /// authentication), so there guests get one only when the operator opts in.
  bool createos_public_ingress = false;
};

/// Reads the settings; a malformed value (e.g. a timeout of "abc") is bad_request naming
/// the variable, never a silent default.
result<sandbox_settings> settings_from_env(const env_map& env);

/// Parses a boolean setting the way Langflow does ("true/1/yes/on", "false/0/no/off").
std::optional<bool> parse_bool(const std::string& text);

/// An integer setting in [min, max] under parse_uint's rule (common/numbers.hpp): nullopt
/// when unset or blank, bad_request naming the variable (uint_refusal) when it is anything
/// else. Every integer read from the environment goes through here.
result<std::optional<uint64_t>> env_uint(const env_map& env, const char* key, uint64_t min,
                                         uint64_t max);

/// The gate: the egress policy to create the guest with, or `policy_refused` with the
/// reason. Never returns a weaker policy than the settings asked for.
result<egress_policy> admit(const sandbox_settings& s, const provider_info& p);

/// The smallest catalog shape with at least max(memory_mb, floor) MiB — never rounding
/// down; a pinned shape must exist in the catalog.
result<shape> pick_shape(const shape_list& catalog, uint64_t memory_mb, uint64_t floor_mib,
                         const std::optional<std::string>& pinned);

/// The gate, the shape and the image together, as every surface asks for them.
struct placement {
  egress_policy egress;
  shape chosen;
  std::optional<std::string> rootfs; ///< CREATEOS_SANDBOX_ROOTFS, else the provider's default
  std::optional<std::string> isolation; ///< GUESTFLOW_ISOLATION, else the provider's default
};
result<placement> place(const sandbox_settings& s, const provider_info& p,
                        const shape_list& catalog);

/// GUESTFLOW_ISOLATION=`kind` against the kinds `p` offers (a provider that lists none offers
/// only the one it is): policy_refused naming the kind and what is offered, never a weaker
/// guest; nullopt when offered or unset. place() asks it; so do the surfaces whose guests
/// are not placed (the flow executor's).
std::optional<failure> isolation_refusal(const std::optional<std::string>& kind,
                                         const provider_info& p);

/// Whether a guest that may serve ports (a session's, a reusable component's) is created
/// with `ingress_enabled`: always on a local control plane (its ingress needs the guest's
/// secret or serve's signed token), on CreateOS only with GUESTFLOW_CREATEOS_PUBLIC_INGRESS.
bool ingress_allowed(const sandbox_settings& s, const provider_info& p);

/// Whether the settings leave a local sandbox run on the guest every default names: deny-all
/// egress, no pinned shape or image, a memory floor the local minimum (256 MiB) covers. Only
/// such a guest can come from the default warm pool (s-1vcpu-256mb, debian:12); a host whose
/// settings ask for another would keep that pool and never use it.
bool default_local_guest(const sandbox_settings& s);

} // namespace guestflow::policy
