#include "bridge/server/surfaces/sessions.hpp"

#include "actors/ask.hpp"
#include "actors/line_relay.hpp"
#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"
#include "messages/session.hpp"

#include <caf/exit_reason.hpp>

namespace guestflow::bridge {

namespace {

using namespace std::chrono_literals;

/// Pool decisions answer at once, but an acquire may wait for a create or wake (and an
/// eviction's stop before it) and the thread's uploads; a release for its outputs.
const caf::duration acquire_limit{5min};
/// A command's own timeout is at most a day; the task answers within it plus its backstop.
caf::duration command_limit(uint32_t timeout_seconds) {
  return caf::duration{std::chrono::seconds{timeout_seconds} + 2min};
}
const caf::duration file_limit{5min};

const session_gateway* gateway(exchange& ex, server_context& ctx) {
  if (!ctx.opts.sessions)
    ex.refuse(failure{ec::unavailable, "sessions are not served by this server"});
  return ctx.opts.sessions;
}

std::string id_of(exchange& ex) {
  return std::string{ex.params().path("id")};
}

template<class... Ts>
void ask_session(exchange& ex, const session_gateway& g, caf::duration limit, Ts&&... xs) {
  ask_for<session_info>(g.sys, g.manager, limit,
                        ex.then<session_info>([](exchange& ex, result<session_info> r) {
                          if (!r) return ex.refuse(r.error());
                          ex.respond(200, encode(*r));
                        }),
                        std::forward<Ts>(xs)...);
}

void acquire(exchange& ex, server_context& ctx) {
  auto g = gateway(ex, ctx);
  if (!g) return;
  auto req = decode<session_request>(ex.take_body(), ex.body_limits());
  if (!req) return ex.refuse(req.error());
  ask_session(ex, *g, acquire_limit, acquire_atom::value, std::move(*req));
}

void get(exchange& ex, server_context& ctx) {
  if (auto g = gateway(ex, ctx))
    ask_session(ex, *g, caf::duration{30s}, get_atom::value, id_of(ex));
}

void release(exchange& ex, server_context& ctx) {
  if (auto g = gateway(ex, ctx))
    ask_session(ex, *g, acquire_limit, release_atom::value, id_of(ex));
}

void remove(exchange& ex, server_context& ctx) {
  auto g = gateway(ex, ctx);
  if (!g) return;
  auto id = id_of(ex);
  ask_for<session_info>(g->sys, g->manager, acquire_limit,
                        ex.then<session_info>([id](exchange& ex, result<session_info> r) {
                          if (!r) return ex.refuse(r.error());
                          ex.respond(200, encode_session_deleted(id));
                        }),
                        delete_atom::value, id);
}

/// A command's answer callback that first gives its execution slot back (on the actor
/// thread, whatever the outcome: the connection may be gone).
reply<command_outcome> releasing(server_context& ctx, std::string slot,
                                 reply<command_outcome> then) {
  return [release = ctx.svc.slot_releaser(std::move(slot)),
          then = std::move(then)](result<command_outcome> r) mutable {
    release();
    then(std::move(r));
  };
}

void command(exchange& ex, server_context& ctx) {
  auto g = gateway(ex, ctx);
  if (!g) return;
  auto cmd = decode<session_command>(ex.take_body(), ex.body_limits());
  if (!cmd) return ex.refuse(cmd.error());
  auto stream = ex.params().text("stream");
  auto lines = stream && (*stream == "true" || *stream == "1");
  auto limit = command_limit(cmd->timeout_seconds);
  // A command is work in a guest like a sandbox run: GUESTFLOW_MAX_INFLIGHT covers it.
  auto slot = ctx.svc.take_slot("session");
  if (!slot) return ex.refuse(slot.error());
  if (lines) {
    // Live: each piece of output is written as the guest prints it; the task sends the
    // last line. Only a refusal before it started (unknown or released session) is a
    // plain error answer.
    // The slot is given back before the last line goes out, so a caller who read it can
    // start its next command at once (the answer callback's release is then a no-op).
    auto relay = ex.begin_lines(ctx.svc.slot_releaser(*slot));
    ask_for<command_outcome>(
        g->sys, g->manager, limit,
        releasing(ctx, std::move(*slot),
                  ex.then<command_outcome>([](exchange& ex, result<command_outcome> r) {
                    if (!r) ex.lines_failed(r.error());
                  })),
        stream_atom::value, id_of(ex), std::move(*cmd), std::move(relay));
    return;
  }
  // Buffered: the output is answered whole at the end, but a caller gone still kills the
  // command (and frees its slot) — the task watches a relay that discards the lines.
  auto watch = g->sys.spawn(line_discard);
  ex.on_disconnect([watch] { caf::anon_send_exit(watch, caf::exit_reason::user_shutdown); });
  ask_for<command_outcome>(
      g->sys, g->manager, limit,
      releasing(ctx, std::move(*slot),
                ex.then<command_outcome>([watch](exchange& ex, result<command_outcome> r) {
                  // A refusal before the task started sent it no last line.
                  caf::anon_send_exit(watch, caf::exit_reason::user_shutdown);
                  if (!r) return ex.refuse(r.error());
                  ex.respond(200, encode(*r));
                })),
      stream_atom::value, id_of(ex), std::move(*cmd), watch);
}

/// A yes/no query flag: absent → `fallback`; 0/1/true/false, else bad_request.
result<bool> flag(exchange& ex, std::string_view name, bool fallback) {
  auto t = ex.params().text(name);
  if (!t) return fallback;
  if (*t == "1" || *t == "true") return true;
  if (*t == "0" || *t == "false") return false;
  return fail(ec::bad_request, std::string{name} + ": expected 0 or 1");
}

/// A number query: absent → nullopt.
result<std::optional<uint64_t>> number(exchange& ex, std::string_view name) {
  auto t = ex.params().text(name);
  if (!t) return std::optional<uint64_t>{};
  uint64_t n = 0;
  if (t->empty() || t->size() > 15)
    return fail(ec::bad_request, std::string{name} + ": not a number");
  for (char c : *t) {
    if (c < '0' || c > '9') return fail(ec::bad_request, std::string{name} + ": not a number");
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return std::optional<uint64_t>{n};
}

/// The file call of a request: its op, path and query options.
result<session_file_call> file_call(exchange& ex, std::string op) {
  session_file_call c;
  c.op = std::move(op);
  auto path = ex.params().text("path");
  if (!path || path->empty()) return fail(ec::bad_request, "path: required");
  c.path = std::move(*path);
  auto need_pattern = c.op == "glob" || c.op == "grep";
  if (need_pattern) {
    auto p = ex.params().text("pattern");
    if (!p || p->empty()) return fail(ec::bad_request, "pattern: required");
    c.pattern = std::move(*p);
  }
  c.glob = ex.params().text("glob").value_or("");
  auto append = flag(ex, "append", false);
  auto dirs = flag(ex, "include_dirs", false);
  auto literal = flag(ex, "literal", false);
  auto cs = flag(ex, "case_sensitive", true);
  auto ignore = flag(ex, "ignore", true);
  for (auto* r : {&append, &dirs, &literal, &cs, &ignore})
    if (!*r) return r->error();
  c.append = *append && c.op == "write";
  c.include_dirs = *dirs;
  c.literal = *literal;
  c.case_sensitive = *cs;
  c.ignore = *ignore;
  auto start = number(ex, "start_line");
  auto end = number(ex, "end_line");
  auto depth = number(ex, "max_depth");
  auto max = number(ex, "max_results");
  for (auto* r : {&start, &end, &depth, &max})
    if (!*r) return r->error();
  c.start_line = *start;
  c.end_line = *end;
  if (c.start_line && *c.start_line == 0) return fail(ec::bad_request, "start_line: 1-based");
  // 0 is DeerFlow's "nothing below the path" (an empty listing of an existing directory).
  c.max_depth = depth->value_or(2);
  if (c.max_depth > 64) return fail(ec::bad_request, "max_depth: expected 0..64");
  c.max_results = max->value_or(c.op == "grep" ? 100 : 200);
  if (c.max_results == 0 || c.max_results > 100000)
    return fail(ec::bad_request, "max_results: expected 1..100000");
  return c;
}

route_handler files(std::string op) {
  return [op](exchange& ex, server_context& ctx) {
    auto g = gateway(ex, ctx);
    if (!g) return;
    auto call = file_call(ex, op == "update" ? "write" : op);
    if (!call) return ex.refuse(call.error());
    if (call->op == "write") call->body = ex.take_body();
    ask_for<session_file_answer>(
        g->sys, g->manager, file_limit,
        ex.then<session_file_answer>([](exchange& ex, result<session_file_answer> r) {
          if (!r) return ex.refuse(r.error());
          ex.respond(200, std::move(r->body), r->content_type);
        }),
        fetch_atom::value, id_of(ex), std::move(*call));
  };
}

} // namespace

void add_session_routes(route_table& t) {
  t.add("POST", "/v1/sessions", endpoint::sessions, acquire);
  t.add("GET", "/v1/sessions/{id}", endpoint::sessions, get);
  t.add("DELETE", "/v1/sessions/{id}", endpoint::sessions, remove);
  t.add("POST", "/v1/sessions/{id}/release", endpoint::sessions, release);
  auto& commands = t.add("POST", "/v1/sessions/{id}/commands", endpoint::sessions, command);
  commands.query_texts = {"stream"};
  commands.slots = slot_use::now;
  const std::vector<std::string> file_query = {
      "path",    "start_line",   "end_line",    "append",    "pattern",        "glob",
      "literal", "include_dirs", "max_results", "max_depth", "case_sensitive", "ignore"};
  for (auto op : {"read", "download", "list", "glob", "grep"})
    t.add("GET", std::string{"/v1/sessions/{id}/files/"} + op, endpoint::sessions, files(op))
        .query_texts = file_query;
  for (auto op : {"write", "update"})
    t.add("PUT", std::string{"/v1/sessions/{id}/files/"} + op, endpoint::sessions, files(op))
        .query_texts = file_query;
}

} // namespace guestflow::bridge
