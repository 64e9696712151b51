#pragma once

#include "messages/error.hpp"

#include <string>
#include <utility>
#include <vector>

namespace guestflow::local {

struct nft_options {
  int netns_fd = -1;       ///< apply inside this network namespace (else the caller's)
  bool check_only = false; ///< validate against the kernel without committing (nft -c)
  /// (path, value) pairs written under /proc/sys/net in that namespace first.
  std::vector<std::pair<std::string, std::string>> netns_sysctls;
};

/// Applies an nftables script as one atomic transaction. Uses libnftables (dlopen'ed: the
/// library the nft tool itself links, so no build dependency) from a thread that entered the
/// namespace — no fork/exec, ~1 ms — and falls back to running `nft_tool -f -` when the
/// library cannot be loaded. Library calls are serialized (libnftables keeps global state).
/// The caller decides whether nftables is installed at all (`nft_tool` must exist).
result<bool> nft_apply(const std::string& nft_tool, const std::string& script,
                       const nft_options& opt = {});

} // namespace guestflow::local
