#pragma once

#include "tests/integration/control_plane/http_client.hpp"

#include <string>
#include <sys/types.h>

namespace guestflow::testing {

/// For a server that must pause between accepts failing for want of descriptors: takes
/// every descriptor number from `pid` (its soft limit at its lowest free one), GETs
/// `target` through `client` meanwhile, and checks that for 500 ms the server neither
/// answers nor spins on accept (its CPU ticks); then gives the limit back and expects the
/// answer, 200.
void expect_it_waits_to_accept_out_of_descriptors(pid_t pid, const http_client& client,
                                                  const std::string& target,
                                                  const header_map& headers = {});

} // namespace guestflow::testing
