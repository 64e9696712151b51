#include "actors/flow_run.hpp"

#include "actors/caf_bridge.hpp"

#include <algorithm>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

namespace guestflow {
namespace {

using self_ptr = flow_run_actor::stateful_pointer<flow_run_state>;
using phase = flow_run_state::phase;

/// Stamps `e` with run id and seq, buffers it and sends it to every subscriber: the log's
/// own shared message, so that neither buffering nor fan-out to N subscribers copies it.
void publish_scrubbed(self_ptr self, run_event e) {
  auto& st = self->state;
  auto& stamped = st.log.append(std::move(e), st.run_id);
  if (st.subs.empty()) return;
  auto& msg = st.log.newest();
  for (auto& s : st.subs)
    if (s.from <= stamped.seq) caf_bridge::enqueue_shared(self, s.handle, msg);
}

/// The one way out for a run's events, so the one place its secrets are masked (a run
/// without variables goes straight through).
void publish(self_ptr self, run_event e) {
  auto& st = self->state;
  if (!st.secrets) return publish_scrubbed(self, std::move(e));
  std::vector<run_event> out;
  st.secrets->feed(std::move(e), out);
  for (auto& x : out)
    publish_scrubbed(self, std::move(x));
}

/// What an ended run counts against the retention budget while it waits for late joiners:
/// its events as NDJSON, and a little for the actor around them, so that runs of few events
/// count too.
size_t retained_bytes(const flow_run_state& st) {
  constexpr size_t actor = 2048;
  return st.log.bytes() + actor;
}

/// The slot is free once the execution is gone (its guest deleted or handed over), which
/// may be after the terminal event: the run answered before its guest's delete.
void released(self_ptr self) {
  auto& st = self->state;
  if (st.parent) self->send(st.parent, released_atom::value, st.run_id);
}

/// Quits, or once the execution is gone: the coordinator frees the slot of a run actor
/// that is gone, and the guest still counts until its delete answered.
void quit_after_execution(self_ptr self) {
  auto& st = self->state;
  if (st.exec && !st.exec_gone) {
    st.quit_pending = true;
    return;
  }
  self->quit();
}

/// The single terminal event; then the slot drains (freed once the execution is gone) and
/// the run waits for late joiners.
void end(self_ptr self, run_event terminal) {
  auto& st = self->state;
  if (st.at == phase::ended) return;
  st.at = phase::ended;
  if (st.opts.slots) st.opts.slots->draining(st.run_id);
  spdlog::debug("flow run {}: {} after {} events", st.run_id,
                terminal.type == run_event::kind::complete ? "complete" : "error",
                st.log.next());
  publish(self, std::move(terminal));
  for (auto& s : st.subs)
    self->demonitor(s.addr);
  st.subs.clear();
  if (st.parent)
    self->send(st.parent, done_atom::value, st.run_id, uint64_t{retained_bytes(st)});
  if (!st.exec || st.exec_gone) released(self);
  if (st.opts.retention.count() == 0) return quit_after_execution(self);
  self->delayed_send(self, st.opts.retention, expire_atom::value);
}

void stop_execution(self_ptr self) {
  auto& st = self->state;
  if (st.stopping || !st.exec) return;
  st.stopping = true;
  self->send(st.exec, cancel_atom::value);
}

/// Stops the run; its terminal event will be `why` (`cancelled` when a caller asked,
/// `unavailable` when the server stops under it).
void cancel(self_ptr self, failure why) {
  auto& st = self->state;
  if (st.at == phase::ended) return;
  if (!st.cancel_reason) st.cancel_reason = std::move(why);
  if (st.at == phase::queued) return end(self, st.frames.finish(*st.cancel_reason));
  stop_execution(self);
}

/// The execution's answer (or its absence) decides the terminal event.
void execution_failed(self_ptr self, const caf::error& err) {
  auto& st = self->state;
  end(self, st.frames.finish(st.cancel_reason ? *st.cancel_reason : to_failure(err)));
}

void start(self_ptr self) {
  auto& st = self->state;
  if (st.at != phase::queued) return;
  st.at = phase::running;
  auto eopts = st.opts.execution;
  eopts.listener = exec_sink_actor{self};
  st.exec = self->spawn(execution, st.cp, st.reaper, eopts);
  self->monitor(st.exec);
  // The execution answers after its own deadlines (create, uploads, exec, delete); this
  // backstop only covers an execution that stopped answering altogether.
  auto calls = static_cast<int64_t>(st.spec->uploads.size() + 3);
  auto backstop = std::chrono::seconds{st.spec->timeout_seconds} + eopts.exec_grace +
                  std::chrono::seconds{10} + eopts.call_timeout * calls;
  // Moved, not copied, and let go: the spec carries the flow (its spec.json, tens of KB) and
  // this actor outlives the run by the retention period for late joiners.
  auto spec = std::move(*st.spec);
  st.spec.reset();
  self->request(st.exec, backstop, run_atom::value, std::move(spec))
      .then([self](execution_report& r) { end(self, self->state.frames.finish(r)); },
            [self](caf::error& err) {
              stop_execution(self); // a lost answer: make sure the guest goes anyway
              execution_failed(self, err);
            });
}

/// Adds a subscriber; one that subscribes again is moved to its new position instead of
/// receiving every event twice.
void attach(self_ptr self, run_subscriber_actor sub, uint64_t from, bool cancel_on_disconnect) {
  auto& st = self->state;
  auto addr = caf::actor_cast<caf::actor_addr>(sub);
  for (auto& s : st.subs)
    if (s.addr == addr) {
      s.from = from;
      s.cancel_on_disconnect = cancel_on_disconnect;
      return;
    }
  self->monitor(sub);
  st.subs.push_back({std::move(sub), std::move(addr), from, cancel_on_disconnect});
}

caf::result<uint64_t> subscribe(self_ptr self, uint64_t from, run_subscriber_actor sub,
                                bool cancel_on_disconnect) {
  auto& st = self->state;
  auto next = st.log.next();
  if (!sub) return make_error(ec::bad_request, "subscribe: no subscriber");
  if (from > next || (st.at == phase::ended && from == next))
    return make_error(ec::bad_request,
                      "from_seq " + std::to_string(from) + " is past the run's " +
                          (st.at == phase::ended ? "last event " + std::to_string(next - 1)
                                                 : "next event " + std::to_string(next)));
  if (from < st.log.first()) {
    run_event e;
    e.run_id = st.run_id;
    e.seq = from;
    e.type = run_event::kind::error;
    e.code = ec::capacity;
    e.message = "events " + std::to_string(from) + ".." + std::to_string(st.log.first() - 1) +
                " of run " + st.run_id + " were evicted from its replay buffer (" +
                std::to_string(st.opts.replay_bytes) + " bytes); subscribe from seq " +
                std::to_string(st.log.first()) + " or later";
    self->send(sub, std::move(e));
    return next;
  }
  st.log.replay(from, [&](const run_event& e) { self->send(sub, e); });
  if (st.at != phase::ended) attach(self, std::move(sub), from, cancel_on_disconnect);
  return next;
}

void on_down(self_ptr self, const caf::down_msg& dm) {
  auto& st = self->state;
  if (st.exec && dm.source == st.exec.address()) {
    st.exec_gone = true;
    // The answer arrives before the down message; still running means none will come.
    if (st.at == phase::running)
      return execution_failed(
          self, make_error(ec::unavailable, "the execution ended without a report"));
    if (st.at == phase::ended) released(self);
    if (st.quit_pending) self->quit();
    return;
  }
  if (st.parent && dm.source == st.parent.address()) {
    st.parent = coordinator_actor{};
    st.opts.retention = std::chrono::seconds{0};
    if (st.at == phase::ended) return quit_after_execution(self);
    return cancel(self, fail(ec::unavailable, "run cancelled: the server is shutting down"));
  }
  auto i =
      std::find_if(st.subs.begin(), st.subs.end(),
                   [&](const flow_run_state::subscriber& s) { return s.addr == dm.source; });
  if (i == st.subs.end()) return;
  auto cancel_on_disconnect = i->cancel_on_disconnect;
  st.subs.erase(i);
  if (st.subs.empty() && cancel_on_disconnect)
    cancel(self, fail(ec::cancelled, "run cancelled: the last subscriber disconnected"));
}

} // namespace

flow_run_actor::behavior_type flow_run(flow_run_actor::stateful_pointer<flow_run_state> self,
                                       coordinator_actor parent, controlplane_actor cp,
                                       reaper_actor reaper, flow_run_init init) {
  auto& st = self->state;
  st.run_id = std::move(init.run_id);
  st.parent = std::move(parent);
  st.cp = std::move(cp);
  st.reaper = std::move(reaper);
  st.spec = std::make_unique<execution_spec>(std::move(init.spec));
  st.opts = std::move(init.opts);
  if (!init.secrets.empty())
    st.secrets = std::make_unique<event_scrubber>(std::move(init.secrets));
  st.opts.frames.timeout_seconds = st.spec->timeout_seconds;
  st.frames = frame_translator{st.opts.frames};
  st.log = event_log{st.opts.replay_bytes};
  if (st.parent) self->monitor(st.parent);
  if (init.first_subscriber)
    attach(self, std::move(init.first_subscriber), 0, init.first_cancel_on_disconnect);
  // Subscribers must not wait forever on a run actor that died: they get an error, and
  // the execution (which monitors this actor) still deletes the guest.
  self->set_exception_handler([self](std::exception_ptr&) -> caf::error {
    end(self, error_event(fail(ec::guest_failed, "internal error in the run actor")));
    return caf::exit_reason::unhandled_exception;
  });
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  return {
      [self](run_atom) { start(self); },
      [self](subscribe_atom, uint64_t from, run_subscriber_actor& sub,
             bool cancel_on_disconnect) -> caf::result<uint64_t> {
        return subscribe(self, from, std::move(sub), cancel_on_disconnect);
      },
      [self](cancel_atom) -> bool {
        if (self->state.at == phase::ended) return false;
        cancel(self, fail(ec::cancelled, "run cancelled by the caller"));
        return true;
      },
      [self](exec_stream_line& line) {
        auto& st = self->state;
        if (st.at != phase::running ||
            caf::actor_cast<caf::actor_addr>(self->current_sender()) != st.exec.address())
          return;
        st.scratch.clear();
        st.frames.on_line(line, st.scratch);
        for (auto& e : st.scratch)
          publish(self, std::move(e));
        if (st.frames.violation()) stop_execution(self);
      },
      [self](expire_atom) { quit_after_execution(self); },
  };
}

} // namespace guestflow
