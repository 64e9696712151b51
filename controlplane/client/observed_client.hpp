#pragma once

#include "controlplane/client/client.hpp"
#include "messages/call_latency.hpp"

#include <memory>

namespace guestflow::cp {

/// Wraps a client so that every call's latency, request to completion (retries included),
/// lands in `latency` — what `guestflow serve` exports in /metrics. Opt-in: the runtime's
/// own bench measures the bare client.
std::shared_ptr<client> observed(std::shared_ptr<client> inner, call_latency& latency);

} // namespace guestflow::cp
