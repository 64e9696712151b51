#pragma once

// Every typed actor interface of guestflow, one `///` line per handler. Actor files
// implement these; nothing else declares a handler.

#include "messages/component.hpp"
#include "messages/execution.hpp"
#include "messages/flow_run.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"
#include "messages/session.hpp"
#include "messages/type_ids.hpp"

#include <caf/atom.hpp>
#include <caf/message.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <cstdint>
#include <string>

namespace guestflow {

// -- atoms (≤ 10 characters) -------------------------------------------------------------

using create_atom = caf::atom_constant<caf::atom("create")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using list_atom = caf::atom_constant<caf::atom("list")>;
using put_atom = caf::atom_constant<caf::atom("put")>;
using fetch_atom = caf::atom_constant<caf::atom("fetch")>;
using exec_atom = caf::atom_constant<caf::atom("exec")>;
using stream_atom = caf::atom_constant<caf::atom("stream")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using resume_atom = caf::atom_constant<caf::atom("resume")>;
using stop_atom = caf::atom_constant<caf::atom("stop")>;
using delete_atom = caf::atom_constant<caf::atom("delete")>;
using egress_atom = caf::atom_constant<caf::atom("egress")>;
using done_atom = caf::atom_constant<caf::atom("done")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using track_atom = caf::atom_constant<caf::atom("track")>;
using created_atom = caf::atom_constant<caf::atom("created")>;
using released_atom = caf::atom_constant<caf::atom("released")>;
using reap_atom = caf::atom_constant<caf::atom("reap")>;
using refused_atom = caf::atom_constant<caf::atom("refused")>;
using sweep_atom = caf::atom_constant<caf::atom("sweep")>;
using drain_atom = caf::atom_constant<caf::atom("drain")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

// -- interfaces ---------------------------------------------------------------------------

/// Receives the lines of one streamed exec, in order, before the stream's reply arrives.
using exec_sink_actor = caf::typed_actor<
    /// One NDJSON line of a streamed exec (stdout / stderr / error / heartbeat).
    caf::reacts_to<exec_stream_line>>;

/// Writes a streamed exec's output to two file descriptors as it arrives (the CLI's live
/// `guestflow code`).
using output_relay_actor = exec_sink_actor::extend<
    /// Answers once every line received before it has been written.
    caf::replies_to<drain_atom>::with<bool>>;

/// The control-plane wire API as messages (wraps `cp::client`; tests script it instead).
/// Every reply is a value or a caf::error carrying a `guestflow::ec`.
using controlplane_actor = caf::typed_actor<
    /// POST /v1/sandboxes — never retried.
    caf::replies_to<create_atom, sandbox_create_request>::with<sandbox_created>,
    /// GET /v1/sandboxes/{id}.
    caf::replies_to<get_atom, std::string>::with<sandbox_view>,
    /// GET /v1/sandboxes?status= — every page, concatenated ("" = any status).
    caf::replies_to<list_atom, std::string>::with<sandbox_list>,
    /// PUT /v1/sandboxes/{id}/files?path= (id, path, bytes).
    caf::replies_to<put_atom, std::string, std::string, shared_bytes>::with<bool>,
    /// GET /v1/sandboxes/{id}/files?path= with a cap that binds during transfer (id, path,
    /// cap).
    caf::replies_to<fetch_atom, std::string, std::string, uint64_t>::with<std::string>,
    /// POST /v1/sandboxes/{id}/exec, buffered, with a host-side deadline in ms — never retried.
    caf::replies_to<exec_atom, std::string, exec_request, uint64_t>::with<exec_result>,
    /// POST …/exec?stream=true: lines go to the sink as they arrive; replies the exit code.
    caf::replies_to<stream_atom, std::string, exec_request, uint64_t,
                    exec_sink_actor>::with<int32_t>,
    /// Cancels the stream feeding this sink (the server kills the command).
    caf::reacts_to<cancel_atom, exec_sink_actor>,
    /// POST …/resume.
    caf::replies_to<resume_atom, std::string>::with<sandbox_view>,
    /// POST …/stop (a persistent guest: memory freed, workspace kept).
    caf::replies_to<stop_atom, std::string>::with<sandbox_view>,
    /// DELETE /v1/sandboxes/{id}.
    caf::replies_to<delete_atom, std::string>::with<sandbox_deleted>,
    /// DELETE /v1/sandboxes/{id}?if_idle_for=S: refused while the guest is in use (reap).
    caf::replies_to<delete_atom, std::string, uint32_t>::with<sandbox_deleted>,
    /// GET …/egress.
    caf::replies_to<egress_atom, std::string>::with<egress_body>,
    /// Internal: a client completion (call id, value or caf::error) hops onto the actor.
    caf::reacts_to<done_atom, uint64_t, caf::message>>;

/// Guaranteed deletion: learns every ephemeral guest name before its create is sent,
/// monitors the owning execution, and deletes whatever a dead or failed owner left.
using reaper_actor = caf::typed_actor<
    /// The sender (an execution) is about to create a guest with this name.
    caf::reacts_to<track_atom, std::string>,
    /// The create for `name` answered with `id`.
    caf::reacts_to<created_atom, std::string, std::string>,
    /// The owner deleted the guest itself: forget it.
    caf::reacts_to<released_atom, std::string>,
    /// The owner answered its run and is deleting the guest itself: a drain waits for its
    /// `released` (or `reap`, or its death) rather than sending a delete beside it.
    caf::reacts_to<delete_atom, std::string>,
    /// The owner could not delete it (or lost the create's answer): the reaper owes the delete.
    caf::reacts_to<reap_atom, std::string>,
    /// The control plane refused the create: most likely nothing was made, but a create the
    /// client re-sent after a reset may have been; one lookup by name settles it.
    caf::reacts_to<refused_atom, std::string>,
    /// Deletes guests of this runtime's owner id that no live execution owns and that are
    /// older than the given seconds; replies how many were deleted.
    caf::replies_to<sweep_atom, uint32_t>::with<uint64_t>,
    /// Shutdown: deletes every tracked ephemeral guest; replies how many are still pending.
    caf::replies_to<drain_atom>::with<uint64_t>,
    /// The counters.
    caf::replies_to<stats_atom>::with<reaper_stats>,
    /// Internal: retry timer for owed deletes.
    caf::reacts_to<tick_atom>>;

/// One execution: owns exactly one guest from create to delete. Spawned per run.
using execution_actor = caf::typed_actor<
    /// Runs the spec; replies once: when its command exited (the guest's delete follows),
    /// else after the guest is gone (or handed to the reaper).
    caf::replies_to<run_atom, execution_spec>::with<execution_report>,
    /// Stops the run: kills the exec, deletes the guest, replies an error to `run`.
    caf::reacts_to<cancel_atom>,
    /// Streamed exec lines (see exec_sink_actor).
    caf::reacts_to<exec_stream_line>>;

// -- whole-flow executor (coordinator, one flow_run per run) ------------------------------

using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;

/// Receives the events of the runs it subscribed to: per run in seq order, gapless from the
/// seq it asked for, ending with exactly one terminal event (`complete` or `error`).
using run_subscriber_actor = caf::typed_actor<
    /// One event of a run.
    caf::reacts_to<run_event>>;

// -- the bridge: actors on behalf of the HTTP server's I/O threads (bridge/server) ---------

/// The run subscriber of one bridge connection (actors/run_relay.hpp): the same interface
/// as run_subscriber_actor, so the coordinator and flow_run stream to it directly. Quits
/// after the terminal event, or at the first event after its connection is gone — which
/// the run sees as that subscriber's disconnect.
using run_relay_actor = caf::typed_actor<
    /// One event of the run: encoded here (off the I/O thread) and handed to the connection.
    caf::reacts_to<run_event>>;

using open_atom = caf::atom_constant<caf::atom("open")>;

/// The relay of one bridge connection's line-streamed answer (actors/line_relay.hpp): a
/// session command's NDJSON output as it happens. Quits after the last line, or at the
/// first message after its connection is gone; a producer monitors it to see the client
/// go away.
using line_relay_actor = caf::typed_actor<
    /// The work started: the answer's head (200, NDJSON) goes out and heartbeats begin.
    caf::reacts_to<open_atom>,
    /// One NDJSON line (without its '\n'); `true`: the last, the answer ends after it.
    caf::reacts_to<std::string, bool>>;

// A thread that never waits on an actor (the bridge's I/O threads) asks through
// actors/ask.hpp: a per-request answer sink with no behavior, so no interface here.

/// One whole-flow run: listener of its execution, frame → event translation, the bounded
/// replay buffer, the subscribers and cancellation. Spawned by the coordinator at admission;
/// stays joinable for a retention period after its terminal event, then quits.
using flow_run_actor = caf::typed_actor<
    /// Admission granted (at once or when a slot frees up): spawn the execution, start.
    caf::reacts_to<run_atom>,
    /// (from_seq, subscriber, cancel_on_disconnect): replays the buffered events from
    /// from_seq, then streams live; replies the next seq the run will assign.
    caf::replies_to<subscribe_atom, uint64_t, run_subscriber_actor, bool>::with<uint64_t>,
    /// Cancels a queued or running run (guest killed and deleted, then `error`); replies
    /// false if the run had already ended.
    caf::replies_to<cancel_atom>::with<bool>,
    /// The lines of its execution's streamed exec (it is that execution's listener).
    caf::reacts_to<exec_stream_line>,
    /// Internal: the retention period after the terminal event is over; the actor quits.
    caf::reacts_to<expire_atom>>;

/// Admission and the run-id registry of whole-flow runs. Bad input and a full queue are
/// refused at once; an admitted run gets an id and a flow_run actor.
using coordinator_actor = caf::typed_actor<
    /// Admits a run; replies its run id (the run may wait in the FIFO queue), or
    /// bad_request / unavailable / capacity with nothing started.
    caf::replies_to<run_atom, run_request>::with<std::string>,
    /// The same, with a first subscriber (subscriber, cancel_on_disconnect) attached from
    /// seq 0 before the run can emit anything.
    caf::replies_to<run_atom, run_request, run_subscriber_actor, bool>::with<std::string>,
    /// (run id, from_seq, subscriber, cancel_on_disconnect): see flow_run_actor; not_found
    /// for an unknown or expired run.
    caf::replies_to<subscribe_atom, std::string, uint64_t, run_subscriber_actor,
                    bool>::with<uint64_t>,
    /// Cancels a run by id; false if it had already ended, not_found if unknown.
    caf::replies_to<cancel_atom, std::string>::with<bool>,
    /// The admission counters.
    caf::replies_to<stats_atom>::with<coordinator_stats>,
    /// Internal: (run id, bytes it keeps for late joiners) the run ended (its slot is
    /// draining: admission::draining): what it retains counts against the retention budget
    /// (the oldest ended runs go first).
    caf::reacts_to<done_atom, std::string, uint64_t>,
    /// Internal: run `id`'s execution is gone (its guest deleted or handed to the reaper):
    /// free its slot.
    caf::reacts_to<released_atom, std::string>,
    /// Queued run `id` got a slot another surface freed (admission::release): start it.
    caf::reacts_to<run_atom, std::string>>;

// -- component surface: reusable guests (registry, lifecycle) -----------------------------

using acquire_atom = caf::atom_constant<caf::atom("acquire")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using ensure_atom = caf::atom_constant<caf::atom("ensure")>;
using poll_atom = caf::atom_constant<caf::atom("poll")>;

/// Brings a guest back to `running` before anything touches it: paused → resume → poll
/// GET until running, within a deadline. Concurrent asks for one guest share the work.
using lifecycle_actor = caf::typed_actor<
    /// Ensures guest `id` is running; replies its view once it is (transient past the
    /// deadline, unavailable for a guest in error/failed/destroying/destroyed).
    caf::replies_to<ensure_atom, std::string>::with<sandbox_view>,
    /// Internal: look at guest `id` again (poll timer).
    caf::reacts_to<poll_atom, std::string>>;

/// The reuse registry. The control plane's names are the registry (`gf-c-<hash>`, see
/// names::reusable): a guest is found by listing and matching its name, so reuse survives
/// a restart and keeps no state of its own. One FIFO queue per name serializes the runs of
/// this runtime on that guest; never two creates for one name.
using guest_registry_actor = caf::typed_actor<
    /// Acquires the reusable guest `req.name` for the sender (waiting behind earlier holders
    /// of that name): adopts the live guest of that name — egress checked against
    /// `req.egress` (egress_drift if it differs; the guest is left alone), then resumed if
    /// paused — or creates it (a create refused because another process won the race
    /// adopts the winner). Replies the guest, running, held until `release`.
    caf::replies_to<acquire_atom, sandbox_create_request>::with<reusable_guest>,
    /// The sender is done with the guest of this name: the next waiter gets it. A holder
    /// that dies releases implicitly.
    caf::reacts_to<release_atom, std::string>,
    /// Deletes `gf-c-` guests idle longer than the given seconds (idle = now −
    /// max(created_at, last_resumed_at, paused_at)) that no run of this runtime holds;
    /// replies how many were deleted.
    caf::replies_to<sweep_atom, uint32_t>::with<uint64_t>>;

// -- the CLI: hand-offs between the actors and its blocking main thread -------------------

/// A run subscriber whose events a blocking thread takes (the CLI's `run` printing loop);
/// the same interface as run_subscriber_actor, so the coordinator streams to it directly.
using event_handoff_actor = caf::typed_actor<
    /// One event of a run, queued for the thread in arrival (= seq) order.
    caf::reacts_to<run_event>>;

/// The sender, on someone else's behalf (`caf::send_as`), of the CLI's start-up sweep: its
/// answer ends the wait for it (an error answer too) and the waiter quits.
using sweep_waiter_actor = caf::typed_actor<
    /// The sweep's answer, how many orphans it deleted: the owner's lease is shared again.
    caf::reacts_to<uint64_t>>;

// -- the message store of serve and the CLI (actors/message_store.hpp) ---------------------

/// Langflow messages per session id in the state dir, for runs without Langflow's own
/// memory (a bare `serve`, the CLI); blocking file I/O on its own thread (spawned detached).
using message_store_actor = caf::typed_actor<
    /// A request with `session_id` and no `history` comes back with the session's stored
    /// messages as its history; any other comes back unchanged. bad_request for a session
    /// id the store does not take.
    caf::replies_to<get_atom, run_request>::with<run_request>,
    /// (session id, message object): appends a message the run stored.
    caf::reacts_to<put_atom, std::string, raw_json>,
    /// Answers once every message sent before it has been written.
    caf::replies_to<drain_atom>::with<bool>>;

// -- agent sessions (actors/session_manager.hpp, actors/session_task.hpp) ------------------

/// One command or file call in a session's guest, spawned per call by the session manager,
/// which delegates the call to it; quits after its answer.
using session_task_actor = exec_sink_actor::extend<
    /// (guest id, command): `sh -lc` in the guest with the call's env and cwd under a
    /// timeout that kills its process group; replies the output in order and the exit.
    caf::replies_to<run_atom, std::string, session_command>::with<command_outcome>,
    /// (guest id, command, relay): the same, each piece of output sent to the relay as it
    /// arrives and the last line (the exit, or the failure) after it; the relay going
    /// away kills the command.
    caf::replies_to<stream_atom, std::string, session_command,
                    line_relay_actor>::with<command_outcome>,
    /// The server is stopping: the running command is killed and answered `unavailable`.
    caf::reacts_to<cancel_atom>,
    /// (guest id, call): the file API through the guest-side tool (guest/session_files.py).
    caf::replies_to<fetch_atom, std::string, session_file_call>::with<session_file_answer>,
    /// (guest id, thread dir): the thread's uploads into the guest; replies the files copied.
    caf::replies_to<put_atom, std::string, std::string>::with<uint64_t>,
    /// (guest id, thread dir): the guest's outputs into the thread dir; the files copied.
    caf::replies_to<get_atom, std::string, std::string>::with<uint64_t>>;

/// The sessions of `guestflow serve`: one guest per (user, thread), the warm pool with its
/// replica cap and idle timeout (actors/session_pool.hpp). Every guest is tracked by the
/// reaper, so the server's shutdown drain deletes them all.
using session_manager_actor = caf::typed_actor<
    /// Acquires the session of (user, thread): active, reclaimed from the warm pool, or
    /// created (concurrent acquires of one key share one create); capacity at the cap with
    /// no warm guest to evict.
    caf::replies_to<acquire_atom, session_request>::with<session_info>,
    /// Releases session `id` into the warm pool (its outputs copied back first).
    caf::replies_to<release_atom, std::string>::with<session_info>,
    /// Deletes session `id` and its guest.
    caf::replies_to<delete_atom, std::string>::with<session_info>,
    /// The session `id`.
    caf::replies_to<get_atom, std::string>::with<session_info>,
    /// (session id, command) in the active session's guest.
    caf::replies_to<run_atom, std::string, session_command>::with<command_outcome>,
    /// (session id, command, relay): the same, its output streamed to the relay as it
    /// happens (session_task_actor); a refusal (unknown or released session) sends none.
    caf::replies_to<stream_atom, std::string, session_command,
                    line_relay_actor>::with<command_outcome>,
    /// (session id, file call) in the active session's guest.
    caf::replies_to<fetch_atom, std::string, session_file_call>::with<session_file_answer>,
    /// The server is stopping: every running command ends with `unavailable` (streamed:
    /// its last line), and new ones are refused so.
    caf::reacts_to<drain_atom>,
    /// Internal: stops the warm guests idle past the timeout.
    caf::reacts_to<tick_atom>>;

} // namespace guestflow
