#include "actors/session_task.hpp"

#include "actors/guest_assets.hpp"
#include "messages/base64.hpp"
#include "messages/bridge.hpp"
#include "messages/type_ids.hpp"

#include <random>

namespace guestflow {

namespace {

using self_ptr = session_task_actor::stateful_pointer<session_task_state>;

/// cd when asked, then the login shell; "$1" and "$2" are the cwd and the command.
constexpr std::string_view command_script =
    "if [ -n \"$1\" ]; then cd -- \"$1\" || exit 1; fi; exec /bin/sh -lc \"$2\" </dev/null";

const std::string& tool_source() {
  static const std::string source = [] {
    for (auto& a : guest_assets())
      if (a.name == "session_files.py") return std::string{a.content};
    return std::string{};
  }();
  return source;
}

std::string stage_path() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char hex[] = "0123456789abcdef";
  // Under /workspace: the file API may refuse the guest's /tmp mount (a tmpfs).
  std::string out = "/workspace/.gf-session/";
  for (int i = 0; i < 16; ++i)
    out.push_back(hex[rng() & 15]);
  return out;
}

uint64_t ms(std::chrono::seconds s) {
  return static_cast<uint64_t>(s.count()) * 1000;
}

/// One piece of output: kept in order (a buffered answer) and, streamed, sent on at once.
void add_chunk(self_ptr self, bool is_stderr, std::string text) {
  auto& st = self->state;
  auto& o = st.outcome;
  if (st.relay) caf::anon_send(st.relay, encode_command_line({is_stderr, text}), false);
  if (!o.chunks.empty() && o.chunks.back().is_stderr == is_stderr)
    o.chunks.back().text += text;
  else
    o.chunks.push_back({is_stderr, std::move(text)});
}

using command_promise = caf::typed_response_promise<command_outcome>;

/// Ends a command: the last line to the relay (streamed), the outcome or failure to `rp`.
void end_command(self_ptr self, command_promise rp, result<command_outcome> r) {
  auto& st = self->state;
  if (st.relay) {
    caf::anon_send(st.relay, r ? encode_command_end(*r) : encode_error(r.error()), true);
    st.relay = nullptr;
  }
  if (r)
    rp.deliver(std::move(*r));
  else
    rp.deliver(make_error(r.error().code, r.error().message));
  self->quit();
}

/// Kills the running command (the control plane kills its process group on the stream's
/// cancel); its answer becomes `why`.
void stop_command(self_ptr self, failure why) {
  auto& st = self->state;
  if (st.stop) return;
  st.stop = std::move(why);
  caf::anon_send(st.cp, cancel_atom::value, caf::actor_cast<exec_sink_actor>(self));
}

/// `sh -lc` in the guest as a streamed exec whose lines come back to this actor.
void run_command(self_ptr self, std::string guest, session_command cmd, command_promise rp) {
  auto started = std::chrono::steady_clock::now();
  auto timeout = cmd.timeout_seconds;
  // The host's deadline is a backstop past the guest's own timeout.
  auto deadline = uint64_t{timeout} * 1000 + 30'000;
  self->request(self->state.cp, caf::duration{std::chrono::milliseconds{deadline + 10'000}},
                stream_atom::value, guest, session_exec_request(cmd), deadline,
                caf::actor_cast<exec_sink_actor>(self))
      .then(
          [self, rp, started, timeout](int32_t raw) mutable {
            auto& o = self->state.outcome;
            o.exec_ms =
                static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now() - started)
                                          .count());
            // timeout(1) exits 124 when it could signal; a KILL of its own group
            // takes it too (137) — then only the elapsed time tells.
            o.timed_out = raw == 124 || (raw == 137 && o.exec_ms >= uint64_t{timeout} * 1000);
            o.exit_code = o.timed_out ? -1 : raw;
            if (auto& stop = self->state.stop) return end_command(self, rp, *stop);
            end_command(self, rp, std::move(o));
          },
          [self, rp](caf::error& e) mutable {
            end_command(self, rp, self->state.stop.value_or(to_failure(e)));
          });
}

/// `{"op": …, "path_b64": …, …}`: every byte string in base64, so the arguments are ASCII.
std::string tool_args(const session_file_call& c, const session_task_options& o,
                      const std::string& stage) {
  std::string a = "{\"op\":" + quote_json(c.op) +
                  ",\"path_b64\":" + quote_json(base64_encode(c.path)) +
                  ",\"stage\":" + quote_json(stage);
  auto num = [&](std::string_view k, uint64_t v) {
    a += ",\"" + std::string{k} + "\":" + std::to_string(v);
  };
  auto flag = [&](std::string_view k, bool v) {
    a += ",\"" + std::string{k} + "\":" + (v ? "true" : "false");
  };
  if (c.start_line) num("start_line", *c.start_line);
  if (c.end_line) num("end_line", *c.end_line);
  flag("append", c.append);
  a += ",\"pattern_b64\":" + quote_json(base64_encode(c.pattern));
  a += ",\"glob_b64\":" + quote_json(base64_encode(c.glob));
  flag("include_dirs", c.include_dirs);
  flag("literal", c.literal);
  flag("case_sensitive", c.case_sensitive);
  flag("ignore", c.ignore);
  num("max_depth", c.max_depth);
  if (c.max_results) num("max_results", c.max_results);
  a += ",\"prefix_b64\":" + quote_json(base64_encode(o.download_prefix));
  num("cap", o.download_cap_bytes);
  return a + "}";
}

using file_promise = caf::typed_response_promise<session_file_answer>;

/// Runs the tool with `args`; `then(json)` on OK, else the promise gets the failure.
template<class F>
void run_tool(self_ptr self, std::string guest, std::string args, file_promise rp, F then) {
  auto& st = self->state;
  self->request(st.cp, st.opts.call_timeout + std::chrono::seconds{10}, exec_atom::value, guest,
                session_tool_request(args), ms(st.opts.call_timeout))
      .then(
          [self, rp, then](exec_result& r) mutable {
            auto answer = session_tool_answer(r);
            if (!answer) {
              rp.deliver(make_error(answer.error().code, answer.error().message));
              return self->quit();
            }
            then(std::move(*answer));
          },
          [self, rp](caf::error& e) mutable {
            rp.deliver(std::move(e));
            self->quit();
          });
}

void finish(self_ptr self, file_promise rp, std::string body, std::string type) {
  rp.deliver(session_file_answer{std::move(body), std::move(type)});
  self->quit();
}

/// `{"data_b64":"…"}` → the bytes.
result<std::string> data_of(const std::string& json) {
  constexpr std::string_view head = "{\"data_b64\":\"";
  if (json.size() < head.size() + 2 || json.compare(0, head.size(), head) != 0 ||
      json.compare(json.size() - 2, 2, "\"}") != 0)
    return fail(ec::guest_failed, "unexpected answer of the file tool");
  auto bytes =
      base64_decode(std::string_view{json}.substr(head.size(), json.size() - head.size() - 2));
  if (!bytes) return fail(ec::guest_failed, "unexpected answer of the file tool");
  return *bytes;
}

void file_call(self_ptr self, std::string guest, session_file_call call, file_promise rp) {
  auto& st = self->state;
  auto stage = stage_path();
  auto args = tool_args(call, st.opts, stage);
  if (call.op == "write") {
    // The bytes go to a staging file under a name of our own; the tool then checks the
    // real path and copies them, so a refused path has nothing written.
    self->request(st.cp, st.opts.call_timeout, put_atom::value, guest, stage,
                  shared_bytes{std::move(call.body)})
        .then(
            [self, guest, args, rp](bool) mutable {
              run_tool(self, guest, args, rp, [self, rp](std::string json) mutable {
                finish(self, rp, std::move(json), "application/json");
              });
            },
            [self, rp](caf::error& e) mutable {
              rp.deliver(std::move(e));
              self->quit();
            });
    return;
  }
  if (call.op == "download") {
    run_tool(self, guest, args, rp, [self, guest, stage, rp](std::string) mutable {
      auto& st = self->state;
      // The cap binds again while the bytes travel: a file that grew after the tool's
      // check is cut off by the control-plane client, not buffered whole.
      self->request(st.cp, st.opts.call_timeout, fetch_atom::value, guest, stage,
                    st.opts.download_cap_bytes)
          .then(
              [self, guest, stage, rp](std::string& bytes) mutable {
                caf::anon_send(self->state.cp, exec_atom::value, guest,
                               exec_request{"rm", {"-f", "--", stage}}, uint64_t{30'000});
                finish(self, rp, std::move(bytes), "application/octet-stream");
              },
              [self, guest, stage, rp](caf::error& e) mutable {
                caf::anon_send(self->state.cp, exec_atom::value, guest,
                               exec_request{"rm", {"-f", "--", stage}}, uint64_t{30'000});
                rp.deliver(std::move(e));
                self->quit();
              });
    });
    return;
  }
  auto is_read = call.op == "read";
  run_tool(self, guest, args, rp, [self, rp, is_read](std::string json) mutable {
    if (!is_read) return finish(self, rp, std::move(json), "application/json");
    auto bytes = data_of(json);
    if (!bytes) {
      rp.deliver(make_error(bytes.error().code, bytes.error().message));
      return self->quit();
    }
    finish(self, rp, std::move(*bytes), "text/plain; charset=utf-8");
  });
}

} // namespace

exec_request session_exec_request(const session_command& cmd) {
  exec_request req;
  req.cmd = "timeout";
  req.args = {"--signal=KILL", std::to_string(cmd.timeout_seconds), "env"};
  for (auto& [k, v] : cmd.env)
    req.args.push_back(k + "=" + v);
  req.args.push_back("/bin/sh");
  req.args.push_back("-c");
  req.args.push_back(std::string{command_script});
  req.args.push_back("sh");
  req.args.push_back(cmd.cwd.value_or(""));
  req.args.push_back(cmd.command);
  return req;
}

exec_request session_tool_request(const std::string& args_json) {
  return exec_request{"python3", {"-I", "-c", tool_source(), args_json}};
}

result<std::string> session_tool_answer(const exec_result& r) {
  const auto& out = r.stdout_text;
  auto line = out.substr(0, out.find('\n'));
  if (r.exit_code == 0 && line.rfind("OK ", 0) == 0) return line.substr(3);
  if (r.exit_code == 0 && line.rfind("ERR ", 0) == 0) {
    auto rest = std::string_view{line}.substr(4);
    auto space = rest.find(' ');
    auto code = ec_from_string(rest.substr(0, space));
    auto message = space == std::string_view::npos
                       ? result<std::string>{fail(ec::guest_failed, "")}
                       : base64_decode(rest.substr(space + 1));
    if (code && message) return fail(*code, *message);
  }
  auto tail = r.stderr_text.size() > 2000 ? r.stderr_text.substr(r.stderr_text.size() - 2000)
                                          : r.stderr_text;
  return fail(ec::guest_failed, "the session file tool failed (exit " +
                                    std::to_string(r.exit_code) +
                                    "; does the guest image have python3?): " + tail);
}

session_task_actor::behavior_type
session_task(session_task_actor::stateful_pointer<session_task_state> self,
             controlplane_actor cp, session_task_options opts) {
  self->state.cp = std::move(cp);
  self->state.opts = std::move(opts);
  return {
      [self](run_atom, std::string& guest, session_command& cmd) {
        auto rp = self->make_response_promise<command_promise>();
        run_command(self, std::move(guest), std::move(cmd), rp);
        return rp;
      },
      [self](stream_atom, std::string& guest, session_command& cmd, line_relay_actor& relay) {
        auto rp = self->make_response_promise<command_promise>();
        auto& st = self->state;
        st.relay = relay;
        // The relay quits when its client goes away: the command is not wanted any more,
        // and the control plane kills it (its whole process group) on the stream's cancel.
        self->monitor(relay);
        self->set_down_handler([self](caf::down_msg& dm) {
          auto& st = self->state;
          if (!st.relay || dm.source != st.relay.address()) return;
          st.relay = nullptr;
          stop_command(self, failure{ec::cancelled, "the client went away"});
        });
        caf::anon_send(relay, open_atom::value);
        run_command(self, std::move(guest), std::move(cmd), rp);
        return rp;
      },
      [self](cancel_atom) {
        stop_command(self, failure{ec::unavailable, "server shutting down"});
      },
      [self](fetch_atom, std::string& guest, session_file_call& call) {
        auto rp = self->make_response_promise<file_promise>();
        file_call(self, std::move(guest), std::move(call), rp);
        return rp;
      },
      [self](exec_stream_line& line) {
        using kind = exec_stream_line::kind;
        switch (line.type) {
        case kind::stdout_chunk:
          return add_chunk(self, false, std::move(line.text));
        case kind::stderr_chunk:
          return add_chunk(self, true, std::move(line.text));
        case kind::error:
          return add_chunk(self, true, "[guestflow] " + line.text + "\n");
        default:
          return;
        }
      },
  };
}

} // namespace guestflow
