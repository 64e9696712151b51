#include "bridge/server/exchange.hpp"
#include "bridge/server/server.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/bridge.hpp"
#include "messages/flow_run.hpp"

namespace guestflow::bridge {

namespace {

/// POST /v1/runs: admits the run with the connection's relay attached from seq 0; the
/// answer (stream or collected) starts once the coordinator said yes.
void start_run(exchange& ex, server_context& ctx) {
  auto req = decode<run_request>(ex.take_body(), ex.body_limits());
  if (!req) return ex.refuse(req.error());
  auto relay = ex.begin_run(req->stream ? run_answer::stream : run_answer::collect);
  ctx.svc.start_run(std::move(*req), std::move(relay),
                    ex.then<std::string>([](exchange& ex, result<std::string> id) {
                      ex.admitted(std::move(id));
                    }));
}

/// GET /v1/runs/{id}/events?from_seq=N: joins the run late, streamed.
void run_events(exchange& ex, server_context& ctx) {
  auto relay = ex.begin_run(run_answer::stream);
  std::string id{ex.params().path("id")};
  ctx.svc.subscribe(id, ex.params().number("from_seq"), std::move(relay),
                    ex.then<uint64_t>([id](exchange& ex, result<uint64_t> r) {
                      if (!r) return ex.admitted(r.error());
                      ex.admitted(id);
                    }));
}

/// DELETE /v1/runs/{id}.
void cancel_run(exchange& ex, server_context& ctx) {
  std::string id{ex.params().path("id")};
  ctx.svc.cancel(id, ex.then<bool>([id](exchange& ex, result<bool> r) {
    if (!r) return ex.refuse(r.error());
    ex.respond(200, encode_cancel_answer(id, *r));
  }));
}

} // namespace

void add_run_routes(route_table& t) {
  t.add("POST", "/v1/runs", endpoint::start_run, start_run).slots = slot_use::or_queue;
  t.add("GET", "/v1/runs/{id}/events", endpoint::run_events, run_events).query_numbers = {
      "from_seq"};
  t.add("DELETE", "/v1/runs/{id}", endpoint::cancel_run, cancel_run);
}

} // namespace guestflow::bridge
