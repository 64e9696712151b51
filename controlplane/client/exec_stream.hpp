#pragma once

#include "controlplane/client/client.hpp"
#include "controlplane/client/http_call.hpp"

#include <memory>

namespace guestflow::cp {

/// Starts `POST …/exec?stream=true` as an http_call whose body goes through an
/// ndjson_reader: every line is decoded as an exec_stream_line and handed to `on_line` as
/// it arrives; `on_done` gets the exit code when the body ends (client.hpp has the failure
/// cases). Never retried, except for the stale-pooled-connection case of http_call.
std::shared_ptr<stream_handle> start_exec_stream(std::shared_ptr<transport> t, call_spec spec,
                                                 exec_stream_callbacks cbs);

/// A handle for a stream that already completed (nothing to cancel).
std::shared_ptr<stream_handle> finished_stream();

} // namespace guestflow::cp
