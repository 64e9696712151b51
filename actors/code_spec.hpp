#pragma once

#include "actors/sandbox_policy.hpp"
#include "messages/execution.hpp"

#include <map>
#include <random>
#include <string>
#include <string_view>

namespace guestflow {

/// The sandbox-backend surface's input: lfx's `run(code, env)`.
struct code_request {
  std::string code;
  std::map<std::string, std::string> env;
};

/// Turns a code snippet into the execution that runs it in a fresh guest, or refuses it:
/// the policy gate decides the egress, the catalog the shape (never rounding down); the
/// program goes to /workspace/main_<hex>.py and runs under `timeout --kill-after=5 N`;
/// auto_pause_after_seconds = max(60, timeout + 120) is the backstop for a guest this
/// process fails to delete. Nothing here talks to the control plane.
result<execution_spec> make_code_spec(const code_request& req,
                                      const policy::sandbox_settings& s,
                                      const policy::provider_info& provider,
                                      const shape_list& catalog, std::string guest_name,
                                      std::mt19937_64& rng);

/// Environment names a caller's `env` may not set (bad_request): the runtime's own wrapper
/// needs them — `PATH` finds timeout(1) and python3, and the dynamic loader's `LD_*`
/// (LD_PRELOAD, LD_LIBRARY_PATH, …) decide what code timeout(1) itself runs.
bool reserved_env_name(std::string_view name);

/// `n` random lowercase hex digits: what makes a run's guest paths its own.
std::string random_hex(std::mt19937_64& rng, int n = 12);

/// max(60, timeout + 120), capped at the wire maximum of 86400.
uint32_t backstop_auto_pause(uint32_t timeout_seconds);

} // namespace guestflow
