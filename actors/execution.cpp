#include "actors/execution.hpp"

#include "actors/exit_classifier.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

namespace guestflow {
namespace {

using self_ptr = execution_actor::stateful_pointer<execution_state>;
using phase = execution_state::phase;
using steady = std::chrono::steady_clock;

/// Milliseconds on the actor clock (virtual under the deterministic scheduler).
uint64_t ms_since(self_ptr self, steady::time_point t) {
  return static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(self->clock().now() - t).count());
}

void note_failure(self_ptr self, failure f) {
  if (!self->state.error)
    self->state.error = std::move(f);
}

bool finished_or_deleting(const execution_state& st) {
  return st.at == phase::deleting || st.at == phase::done || st.at == phase::failed;
}

/// Replies to the caller and stops. Runs once, after the guest is deleted or handed over.
void finish(self_ptr self) {
  auto& st = self->state;
  st.at = st.error || st.cancelled ? phase::failed : phase::done;
  if (st.promise.pending()) {
    if (st.error)
      st.promise.deliver(make_error(st.error->code, st.error->message));
    else if (st.cancelled)
      st.promise.deliver(make_error(ec::guest_failed, "run cancelled"));
    else
      st.promise.deliver(execution_report{st.guest_id, st.spec.name, st.result, st.outcome,
                                          ms_since(self, st.started)});
  }
  self->quit();
}

/// Exactly one delete per created guest, whatever happened before. A delete that fails
/// is owed by the reaper from then on.
void delete_guest(self_ptr self) {
  auto& st = self->state;
  if (finished_or_deleting(st))
    return;
  st.at = phase::deleting;
  if (st.spec.stream)
    self->send(st.cp, cancel_atom::value, exec_sink_actor{self});
  self->request(st.cp, st.opts.call_timeout, delete_atom::value, st.guest_id)
    .then(
      [self](sandbox_deleted&) {
        self->send(self->state.reaper, released_atom::value, self->state.spec.name);
        finish(self);
      },
      [self](caf::error& err) {
        auto& st = self->state;
        if (to_failure(err).code == ec::not_found)
          self->send(st.reaper, released_atom::value, st.spec.name);
        else
          self->send(st.reaper, reap_atom::value, st.spec.name);
        finish(self);
      });
}

void exec_done(self_ptr self, int32_t raw, std::optional<std::string> error) {
  auto& st = self->state;
  auto elapsed = ms_since(self, st.exec_started);
  auto c = classify_exit(raw, error, elapsed, st.spec.timeout_seconds);
  st.result.exit_code = c.exit_code;
  st.result.error = std::move(error);
  st.result.exec_ms = elapsed;
  st.outcome = c.outcome;
  delete_guest(self);
}

void exec_failed(self_ptr self, caf::error& err) {
  if (self->state.at != phase::running)
    return;
  note_failure(self, to_failure(err));
  delete_guest(self);
}

void start_command(self_ptr self) {
  auto& st = self->state;
  st.at = phase::running;
  st.exec_started = self->clock().now();
  auto deadline = std::chrono::seconds{st.spec.timeout_seconds} + st.opts.exec_grace;
  auto deadline_ms = static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(deadline).count());
  auto backstop = deadline + std::chrono::seconds{10};
  if (st.spec.stream) {
    self->request(st.cp, backstop, stream_atom::value, st.guest_id, st.spec.command,
                  deadline_ms, exec_sink_actor{self})
      .then(
        [self](int32_t code) {
          if (self->state.at == phase::running)
            exec_done(self, code, std::move(self->state.result.error));
        },
        [self](caf::error& err) { exec_failed(self, err); });
    return;
  }
  self->request(st.cp, backstop, exec_atom::value, st.guest_id, st.spec.command, deadline_ms)
    .then(
      [self](exec_result& r) {
        auto& st = self->state;
        if (st.at != phase::running)
          return;
        st.result.stdout_text = std::move(r.stdout_text);
        st.result.stderr_text = std::move(r.stderr_text);
        exec_done(self, r.exit_code, std::move(r.error));
      },
      [self](caf::error& err) { exec_failed(self, err); });
}

/// Uploads one file after another, then starts the command.
void upload_next(self_ptr self) {
  auto& st = self->state;
  if (st.at != phase::uploading)
    return;
  if (st.cancelled)
    return delete_guest(self);
  if (st.next_upload == st.spec.uploads.size())
    return start_command(self);
  auto& up = st.spec.uploads[st.next_upload++];
  self->request(st.cp, st.opts.call_timeout, put_atom::value, st.guest_id, up.path, up.content)
    .then([self](bool) { upload_next(self); },
          [self](caf::error& err) {
            note_failure(self, to_failure(err));
            delete_guest(self);
          });
}

/// Cancel and caller loss share one path: stop wanting the result, still delete.
void stop(self_ptr self) {
  auto& st = self->state;
  st.cancelled = true;
  if (st.at == phase::uploading || st.at == phase::running)
    delete_guest(self);
}

void append_capped(std::string& out, const std::string& chunk, size_t cap) {
  if (out.size() < cap)
    out.append(chunk, 0, std::min(chunk.size(), cap - out.size()));
}

} // namespace

execution_actor::behavior_type
execution(execution_actor::stateful_pointer<execution_state> self, controlplane_actor cp,
          reaper_actor reaper, execution_options opts) {
  auto& st = self->state;
  st.cp = std::move(cp);
  st.reaper = std::move(reaper);
  st.opts = std::move(opts);
  // An exception must not lose the guest: the caller gets an error now, and the reaper,
  // which monitors this actor, deletes whatever it tracked for it.
  self->set_exception_handler([self](std::exception_ptr&) -> caf::error {
    if (self->state.promise.pending())
      self->state.promise.deliver(make_error(ec::guest_failed, "internal error in execution"));
    return caf::exit_reason::unhandled_exception;
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.caller)
      stop(self);
  });
  return {
    [self](run_atom, execution_spec& spec) -> caf::typed_response_promise<execution_report> {
      auto& st = self->state;
      // Read the sender first: making the promise moves it out of the current message.
      auto sender = self->current_sender();
      auto rp = self->make_response_promise<caf::typed_response_promise<execution_report>>();
      if (st.at != phase::requested) {
        rp.deliver(make_error(ec::bad_request, "an execution runs exactly one spec"));
        return rp;
      }
      st.promise = rp;
      st.spec = std::move(spec);
      st.started = self->clock().now();
      if (sender) {
        st.caller = caf::actor_cast<caf::actor_addr>(sender);
        self->monitor(sender);
      }
      // The reaper learns the name before the create is sent: if this actor dies from here
      // on, whatever the control plane made under that name is deleted.
      self->send(st.reaper, track_atom::value, st.spec.name);
      st.at = phase::creating;
      self->request(st.cp, st.opts.call_timeout, create_atom::value, st.spec.create)
        .then(
          [self](sandbox_created& c) {
            auto& st = self->state;
            st.guest_id = c.id;
            self->send(st.reaper, created_atom::value, st.spec.name, c.id);
            st.at = phase::uploading;
            upload_next(self);
          },
          [self](caf::error& err) {
            // The create may still have happened (lost answer, timeout): the reaper deletes
            // by name whatever appears under it.
            note_failure(self, to_failure(err));
            self->send(self->state.reaper, reap_atom::value, self->state.spec.name);
            finish(self);
          });
      return rp;
    },
    [self](cancel_atom) { stop(self); },
    [self](exec_stream_line& line) {
      auto& st = self->state;
      if (st.at != phase::running)
        return;
      if (st.opts.listener) {
        self->send(st.opts.listener, std::move(line));
        return;
      }
      using k = exec_stream_line::kind;
      if (line.type == k::stdout_chunk)
        append_capped(st.result.stdout_text, line.text, st.opts.stdout_cap);
      else if (line.type == k::stderr_chunk)
        append_capped(st.result.stderr_text, line.text, st.opts.stderr_cap);
      else if (line.type == k::error)
        st.result.error = line.text;
    },
  };
}

} // namespace guestflow
