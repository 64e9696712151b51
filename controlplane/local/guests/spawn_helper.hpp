#pragma once

#include "common/unique_fd.hpp"
#include "messages/error.hpp"

#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

/// Starting processes without fork(): the server is big and multi-threaded, and a fork
/// copies its page tables and makes every later write of either side fault (with TLB
/// shootdowns across its threads). Instead the server posix_spawns (glibc:
/// clone(CLONE_VM|CLONE_VFORK), nothing copied) a small static helper
/// (spawn_helper/helper.cpp, compiled in as bytes, run from a sealed memfd) that does the
/// privileged steps — cgroups, namespaces, mounts, uid, seccomp — and execs the real
/// program; its own forks are cheap. What the helper expects per mode is in
/// spawn_helper/protocol.hpp.
namespace guestflow::local {

/// The helper's bytes (generated from spawn_helper/helper.cpp).
std::string_view spawn_helper_image() noexcept;

/// `bytes` in a sealed (no grow, shrink or write), read-only memfd: whoever inherits it can
/// neither change it nor hold it open for writing (which would make exec fail with ETXTBSY).
result<unique_fd> sealed_memfd(const char* name, std::string_view bytes);

/// posix_spawns the helper with `args` after argv[0] (the mode first), `env` as its
/// environment and `fds[i]` as its descriptor i (nothing else inherited), every signal at
/// its default disposition and none blocked. Returns the helper's pid (the caller reaps it).
result<pid_t> spawn_helper(const std::vector<std::string>& args,
                           const std::vector<std::string>& env, const std::vector<int>& fds);

} // namespace guestflow::local
