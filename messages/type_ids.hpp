#pragma once

// The one place where every type that crosses an actor or process boundary is given a CAF
// type id, and every atom is declared. Local sends work unregistered and then fail across
// a middleman, so an actor message type that is missing here is a bug.
// Register with: cfg.add_message_types<caf::id_block::guestflow>() (see register_types()).

#include "messages/component.hpp"
#include "messages/error.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"
#include "messages/graph.hpp"
#include "messages/inspect_optional.hpp"
#include "messages/jsend.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"
#include "messages/session.hpp"

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/fwd.hpp>
#include <caf/type_id.hpp>

CAF_BEGIN_TYPE_ID_BLOCK(guestflow, caf::first_custom_type_id)

CAF_ADD_TYPE_ID(guestflow, (guestflow::failure))
CAF_ADD_TYPE_ID(guestflow, (guestflow::raw_json))
CAF_ADD_TYPE_ID(guestflow, (guestflow::egress_rule))
CAF_ADD_TYPE_ID(guestflow, (guestflow::egress_policy))
CAF_ADD_TYPE_ID(guestflow, (guestflow::shape))
CAF_ADD_TYPE_ID(guestflow, (guestflow::shape_list))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_create_request))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_created))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_view))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_list))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_deleted))
CAF_ADD_TYPE_ID(guestflow, (guestflow::whoami))
CAF_ADD_TYPE_ID(guestflow, (guestflow::egress_body))
CAF_ADD_TYPE_ID(guestflow, (guestflow::exec_request))
CAF_ADD_TYPE_ID(guestflow, (guestflow::exec_result))
CAF_ADD_TYPE_ID(guestflow, (guestflow::exec_stream_line))
CAF_ADD_TYPE_ID(guestflow, (guestflow::capabilities))
CAF_ADD_TYPE_ID(guestflow, (guestflow::jsend))
CAF_ADD_TYPE_ID(guestflow, (guestflow::graph_node))
CAF_ADD_TYPE_ID(guestflow, (guestflow::graph_edge))
CAF_ADD_TYPE_ID(guestflow, (guestflow::flow_graph))
CAF_ADD_TYPE_ID(guestflow, (guestflow::result_data))
CAF_ADD_TYPE_ID(guestflow, (guestflow::run_outputs))
CAF_ADD_TYPE_ID(guestflow, (guestflow::guest_frame))
CAF_ADD_TYPE_ID(guestflow, (guestflow::run_event))
CAF_ADD_TYPE_ID(guestflow, (guestflow::sandbox_result))
CAF_ADD_TYPE_ID(guestflow, (guestflow::shared_bytes))
CAF_ADD_TYPE_ID(guestflow, (guestflow::upload))
CAF_ADD_TYPE_ID(guestflow, (guestflow::execution_spec))
CAF_ADD_TYPE_ID(guestflow, (guestflow::execution_report))
CAF_ADD_TYPE_ID(guestflow, (guestflow::reaper_stats))
CAF_ADD_TYPE_ID(guestflow, (guestflow::run_input))
CAF_ADD_TYPE_ID(guestflow, (guestflow::run_request))
CAF_ADD_TYPE_ID(guestflow, (guestflow::coordinator_stats))
CAF_ADD_TYPE_ID(guestflow, (guestflow::reusable_guest))
CAF_ADD_TYPE_ID(guestflow, (guestflow::returned_file))
CAF_ADD_TYPE_ID(guestflow, (guestflow::dropped_member))
CAF_ADD_TYPE_ID(guestflow, (guestflow::returned_files))
CAF_ADD_TYPE_ID(guestflow, (guestflow::session_request))
CAF_ADD_TYPE_ID(guestflow, (guestflow::session_info))
CAF_ADD_TYPE_ID(guestflow, (guestflow::session_command))
CAF_ADD_TYPE_ID(guestflow, (guestflow::output_chunk))
CAF_ADD_TYPE_ID(guestflow, (guestflow::command_outcome))
CAF_ADD_TYPE_ID(guestflow, (guestflow::session_file_call))
CAF_ADD_TYPE_ID(guestflow, (guestflow::session_file_answer))

CAF_END_TYPE_ID_BLOCK(guestflow)

namespace guestflow {

/// CAF error category of `ec`.
constexpr caf::atom_value error_category = caf::atom("guestflow");

/// `ec` + message as a caf::error (found by ADL, so `caf::error{ec::timeout}` works too).
caf::error make_error(ec code, std::string message = {});

/// The failure a caf::error carries; CAF's own errors (request timeouts, dead actors)
/// map to `transient` / `unavailable` with CAF's rendering as the message.
failure to_failure(const caf::error& err);

/// Registers the type-id block and the error category with an actor system config.
void register_types(caf::actor_system_config& cfg);

} // namespace guestflow
