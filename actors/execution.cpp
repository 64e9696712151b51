#include "actors/execution.hpp"

#include "actors/artifact_archive.hpp"
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
  if (!self->state.error) self->state.error = std::move(f);
}

bool finished_or_deleting(const execution_state& st) {
  return st.at == phase::deleting || st.at == phase::done || st.at == phase::failed;
}

/// The control plane answered the create with a refusal. `transient` (429, 5xx, timeouts)
/// and `unavailable` (which also stands for a connection lost after the request went out)
/// are not refusals.
bool refused_outright(ec code) {
  return code == ec::bad_request || code == ec::policy_refused || code == ec::not_found ||
         code == ec::paused || code == ec::capacity;
}

bool reusable(const execution_state& st) {
  return static_cast<bool>(st.opts.registry);
}

/// Replies to the caller, once: at the run's outcome (see delete_guest), else when the
/// actor finishes.
void answer(self_ptr self) {
  auto& st = self->state;
  if (st.promise.pending()) {
    if (st.error) {
      st.promise.deliver(make_error(st.error->code, st.error->message));
    } else if (st.cancelled) {
      st.promise.deliver(make_error(ec::cancelled, "run cancelled"));
    } else {
      execution_report r;
      r.guest_id = st.guest_id;
      r.name = st.spec.name;
      r.result = st.result;
      r.outcome = st.outcome;
      r.total_ms = ms_since(self, st.started);
      if (st.files) r.files = std::move(*st.files);
      r.reused = st.reused;
      st.promise.deliver(std::move(r));
    }
  }
}

/// Replies (unless it did already) and stops. Runs once, after the guest is deleted or
/// handed over: the caller's slot is held until this actor is gone.
void finish(self_ptr self) {
  auto& st = self->state;
  st.at = st.error || st.cancelled ? phase::failed : phase::done;
  answer(self);
  // The monitor is an attachable on the caller holding a weak reference to this actor:
  // left there, a long-lived caller would keep every finished execution's memory (~2 KB
  // each) until the caller itself ends.
  if (st.caller) self->demonitor(st.caller);
  self->quit();
}

/// Sends a call on the guest (`send()` returns the response handle); a call answered
/// `paused` — auto-pause raced the run — resumes the guest through the lifecycle actor
/// and is sent once more, unless the run moved on meanwhile (cancelled, deleting).
template<class Send, class Ok, class Err>
void on_guest(self_ptr self, Send send, Ok ok, Err err, bool retried = false) {
  auto at = self->state.at;
  send().then(ok, [self, send, ok, err, retried, at](caf::error& e) mutable {
    auto& st = self->state;
    if (retried || !st.opts.lifecycle || to_failure(e).code != ec::paused || st.at != at)
      return err(e);
    self->request(st.opts.lifecycle, st.opts.call_timeout, ensure_atom::value, st.guest_id)
        .then(
            [self, send, ok, err, at](sandbox_view&) mutable {
              if (self->state.at != at)
                return; // cancelled while resuming: the stop path owns the guest now
              on_guest(self, send, ok, err, true);
            },
            [self, err, at](caf::error& e2) mutable {
              if (self->state.at == at) err(e2);
            });
  });
}

void finish_reusable(self_ptr self) {
  self->send(self->state.opts.registry, release_atom::value, self->state.spec.name);
  finish(self);
}

/// A kept guest keeps what the program wrote, not what the runtime put there: the uploads
/// and the archive are removed (best effort), then the guest goes back to the registry.
void release_guest(self_ptr self) {
  auto& st = self->state;
  exec_request rm{"rm", {"-f", "--"}};
  for (auto& up : st.spec.uploads)
    rm.args.push_back(up.path);
  if (st.opts.collect) rm.args.push_back(st.opts.collect->archive);
  if (rm.args.size() == 2 || st.guest_id.empty()) return finish_reusable(self);
  self->request(st.cp, st.opts.call_timeout, exec_atom::value, st.guest_id, rm,
                uint64_t{60'000})
      .then([self](exec_result&) { finish_reusable(self); },
            [self](caf::error&) { finish_reusable(self); });
}

/// Exactly one delete per created guest, whatever happened before. A delete that fails
/// is owed by the reaper from then on. A reusable guest is released instead. A run whose
/// outcome is known (its command exited, its files collected) is answered before its
/// delete, which the caller need not wait for: the reaper still owes the guest if this
/// actor dies before the delete answered, and the caller's slot is held until this actor
/// is gone. Failures and cancels still answer once the guest is gone.
void delete_guest(self_ptr self) {
  auto& st = self->state;
  if (finished_or_deleting(st)) return;
  st.at = phase::deleting;
  if (st.spec.stream) self->send(st.cp, cancel_atom::value, exec_sink_actor{self});
  if (reusable(st)) return release_guest(self);
  if (st.exited && !st.error && !st.cancelled) {
    // First: a caller that ends at the answer (a CLI) drains the reaper next, which must
    // know this delete is on its way rather than send one beside it.
    self->send(st.reaper, delete_atom::value, st.spec.name);
    answer(self);
  }
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

// -- returned files ---------------------------------------------------------------------

void collect_failed(self_ptr self, failure f) {
  auto& st = self->state;
  st.files = std::make_unique<returned_files>();
  st.files->error = std::move(f);
  delete_guest(self);
}

void fetch_archive(self_ptr self) {
  auto& st = self->state;
  auto& c = *st.opts.collect;
  on_guest(
      self,
      [self, path = c.archive, cap = c.cap_bytes] {
        auto& st = self->state;
        return self->request(st.cp, st.opts.call_timeout, fetch_atom::value, st.guest_id, path,
                             cap);
      },
      [self](std::string& bytes) {
        auto& st = self->state;
        if (st.at != phase::collecting) return;
        auto unpacked = artifacts::unpack(bytes);
        std::string{}.swap(bytes); // the archive is not kept once unpacked
        if (!unpacked) return collect_failed(self, std::move(unpacked).error());
        st.files = std::make_unique<returned_files>(std::move(*unpacked));
        delete_guest(self);
      },
      [self](caf::error& err) {
        if (self->state.at == phase::collecting) collect_failed(self, to_failure(err));
      });
}

/// tar inside the guest (it runs where the files are; the host only ever sees one
/// capped archive), then the capped fetch.
void collect(self_ptr self) {
  auto& st = self->state;
  st.at = phase::collecting;
  auto& c = *st.opts.collect;
  auto tar = with_timeout(c.tar_timeout_seconds, "tar",
                          {"-C", c.dir, "-cf", c.archive, "--format=pax", "."});
  auto deadline_ms = (uint64_t{c.tar_timeout_seconds} + 30) * 1000;
  on_guest(
      self,
      [self, tar, deadline_ms] {
        auto& st = self->state;
        return self->request(st.cp, std::chrono::milliseconds{deadline_ms + 10'000},
                             exec_atom::value, st.guest_id, tar, deadline_ms);
      },
      [self](exec_result& r) {
        if (self->state.at != phase::collecting) return;
        // GNU tar exits 1 when a file changed while it was read: the archive is still whole.
        if (r.exit_code != 0 && r.exit_code != 1) {
          auto why = r.stderr_text.substr(0, 500);
          return collect_failed(
              self,
              fail(ec::guest_failed, "archiving /workspace/artifacts failed (tar exited " +
                                         std::to_string(r.exit_code) + ")" +
                                         (why.empty() ? "" : ": " + why)));
        }
        fetch_archive(self);
      },
      [self](caf::error& err) {
        if (self->state.at == phase::collecting) collect_failed(self, to_failure(err));
      });
}

// -- the command --------------------------------------------------------------------------

/// `program_ms`: the program's own run as the control plane measured it (exec_result's
/// exec_ms: spawn to exit; a streamed exec's exit line carries it too), which a stall of
/// the host around it does not inflate; 0 (a control plane that does not say): the time
/// this actor saw.
void exec_done(self_ptr self, int32_t raw, std::optional<std::string> error,
               uint64_t program_ms = 0) {
  auto& st = self->state;
  auto elapsed = program_ms ? program_ms : ms_since(self, st.exec_started);
  auto c = classify_exit(raw, st.result.oom_killed);
  st.result.exit_code = c.exit_code;
  st.result.error = std::move(error);
  st.result.exec_ms = elapsed;
  st.outcome = c.outcome;
  st.exited = true;
  if (st.opts.collect && !st.cancelled) return collect(self);
  delete_guest(self);
}

void exec_failed(self_ptr self, caf::error& err) {
  if (self->state.at != phase::running) return;
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
    on_guest(
        self,
        [self, backstop, deadline_ms] {
          auto& st = self->state;
          return self->request(st.cp, backstop, stream_atom::value, st.guest_id,
                               st.spec.command, deadline_ms, exec_sink_actor{self});
        },
        [self](int32_t code) {
          if (self->state.at == phase::running)
            exec_done(self, code, std::move(self->state.result.error),
                      self->state.stream_exec_ms);
        },
        [self](caf::error& err) { exec_failed(self, err); });
    return;
  }
  on_guest(
      self,
      [self, backstop, deadline_ms] {
        auto& st = self->state;
        return self->request(st.cp, backstop, exec_atom::value, st.guest_id, st.spec.command,
                             deadline_ms);
      },
      [self](exec_result& r) {
        auto& st = self->state;
        if (st.at != phase::running) return;
        st.result.stdout_text = std::move(r.stdout_text);
        st.result.stderr_text = std::move(r.stderr_text);
        st.result.truncated |= r.truncated;
        st.result.oom_killed = r.oom_killed;
        exec_done(self, r.exit_code, std::move(r.error), r.exec_ms);
      },
      [self](caf::error& err) { exec_failed(self, err); });
}

/// Uploads one file after another, then starts the command.
void upload_next(self_ptr self) {
  auto& st = self->state;
  if (st.at != phase::uploading) return;
  if (st.cancelled) return delete_guest(self);
  if (st.next_upload == st.spec.uploads.size()) return start_command(self);
  auto i = st.next_upload++;
  on_guest(
      self,
      [self, i] {
        auto& st = self->state;
        auto& up = st.spec.uploads[i];
        return self->request(st.cp, st.opts.call_timeout, put_atom::value, st.guest_id, up.path,
                             up.content);
      },
      [self, i](bool) {
        // Uploaded: the guest has it now. What the run owns (a flow's spec.json, a program)
        // would otherwise stay in memory for as long as the run (minutes) goes on.
        self->state.spec.uploads[i].content = {};
        upload_next(self);
      },
      [self](caf::error& err) {
        if (self->state.at != phase::uploading) return;
        note_failure(self, to_failure(err));
        delete_guest(self);
      });
}

/// Cancel and caller loss share one path: stop wanting the result, still delete.
void stop(self_ptr self) {
  auto& st = self->state;
  st.cancelled = true;
  if (st.at == phase::uploading || st.at == phase::running || st.at == phase::collecting)
    delete_guest(self);
}

/// Appends what fits under `cap`; false when some of `chunk` had to be dropped.
bool append_capped(std::string& out, const std::string& chunk, size_t cap) {
  auto room = cap - std::min(cap, out.size());
  out.append(chunk, 0, std::min(chunk.size(), room));
  return chunk.size() <= room;
}

/// Ephemeral: the reaper learns the name before the create is sent, so if this actor dies
/// from here on, whatever the control plane made under that name is deleted.
void create_guest(self_ptr self) {
  auto& st = self->state;
  self->send(st.reaper, track_atom::value, st.spec.name);
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
            auto f = to_failure(err);
            auto& st = self->state;
            // A refusal the control plane answered most likely made nothing: the reaper looks
            // the name up once (a re-sent create may have made it) instead of watching it for
            // minutes, which a CLI would wait for at exit. Any other failure (a lost answer, a
            // timeout, a 5xx) may hide a guest that appears later: the reaper watches the name.
            if (refused_outright(f.code))
              self->send(st.reaper, refused_atom::value, st.spec.name);
            else
              self->send(st.reaper, reap_atom::value, st.spec.name);
            note_failure(self, std::move(f));
            finish(self);
          });
}

/// Reusable: the registry adopts or creates the guest and holds it for this run until the
/// release (or this actor's death, which it monitors).
void acquire_guest(self_ptr self) {
  auto& st = self->state;
  // Queueing behind another run of the same guest is part of the wait: no short backstop.
  auto wait = st.opts.call_timeout * 4 + std::chrono::seconds{st.spec.timeout_seconds} * 4;
  self->request(st.opts.registry, wait, acquire_atom::value, st.spec.create)
      .then(
          [self](reusable_guest& g) {
            auto& st = self->state;
            st.guest_id = g.id;
            st.reused = !g.created;
            st.at = phase::uploading;
            upload_next(self);
          },
          [self](caf::error& err) {
            note_failure(self, to_failure(err));
            finish(self); // nothing is held: a refused acquire hands nothing out
          });
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
  // which monitors this actor, deletes whatever it tracked for it (a reusable guest goes
  // back to the registry, which monitors this actor too).
  self->set_exception_handler([self](std::exception_ptr&) -> caf::error {
    if (self->state.promise.pending())
      self->state.promise.deliver(make_error(ec::guest_failed, "internal error in execution"));
    return caf::exit_reason::unhandled_exception;
  });
  self->set_down_handler([self](caf::down_msg& dm) {
    if (dm.source == self->state.caller) stop(self);
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
        if (st.cancelled) { // cancelled before it started: nothing is created
          finish(self);
          return rp;
        }
        st.spec = std::move(spec);
        st.started = self->clock().now();
        if (sender) {
          st.caller = caf::actor_cast<caf::actor_addr>(sender);
          self->monitor(sender);
        }
        st.at = phase::creating;
        if (reusable(st))
          acquire_guest(self);
        else
          create_guest(self);
        return rp;
      },
      [self](cancel_atom) { stop(self); },
      [self](exec_stream_line& line) {
        auto& st = self->state;
        if (st.at != phase::running) return;
        using k = exec_stream_line::kind;
        // What the exit means (the control plane's cut and OOM count) is the run's, listener
        // or not: the classification and the report need it.
        if (line.type == k::outcome || line.type == k::exit_code) {
          st.result.truncated |= line.truncated;
          st.result.oom_killed |= line.oom_killed;
          if (line.exec_ms) st.stream_exec_ms = *line.exec_ms;
        }
        if (st.opts.listener) {
          self->send(st.opts.listener, std::move(line));
          return;
        }
        if (line.type == k::stdout_chunk) {
          if (!append_capped(st.result.stdout_text, line.text, st.opts.stdout_cap))
            st.result.truncated.stdout_cut = true;
        } else if (line.type == k::stderr_chunk) {
          if (!append_capped(st.result.stderr_text, line.text, st.opts.stderr_cap))
            st.result.truncated.stderr_cut = true;
        } else if (line.type == k::error) {
          st.result.error = line.text;
        }
      },
  };
}

} // namespace guestflow
