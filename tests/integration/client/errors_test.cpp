// Error mapping, retries and deadlines against a real server: what is retried (idempotent
// calls on transient), what never is (create, exec), and that every call ends in time.
#include "messages/sandbox.hpp"
#include "tests/integration/client/client_fixture.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

using namespace gft;
using namespace guestflow;

namespace {

/// Answers the first `failures` requests with `status` + `body`, then `ok_data` (success).
handler flaky(unsigned status, std::string body, int failures, std::string ok_data) {
  auto count = std::make_shared<std::atomic<int>>(0);
  return [=](exchange& ex) {
    if (count->fetch_add(1) < failures)
      ex.respond(status, body, {{"Retry-After", "0"}});
    else
      ex.success(ok_data);
  };
}

const std::string view_running = view_json("sb-1", "running");
const std::string created_json =
    R"({"id":"sb-1","name":"n","ip":"10.0.0.2","shape":"s","rootfs":"r","vcpu":1,"mem_mib":256,)"
    R"("disk_mib":1,"spawn_ms":1,"egress":["*"]})";

/// A port nothing listens on (bound once, then closed).
uint16_t closed_port() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(
      ioc, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

} // namespace

TEST_F(cp_client, idempotent_calls_retry_429_and_503_until_success) {
  srv->route("GET", "/v1/sandboxes/sb-1", flaky(503, error_body("busy", 503), 2, view_running));
  srv->route(
      "DELETE", "/v1/sandboxes/sb-1",
      flaky(429, error_body("slow down", 429), 1, R"({"id":"sb-1","status":"destroyed"})"));
  srv->route("POST", "/v1/sandboxes/sb-1/pause",
             flaky(503, "", 1, view_json("sb-1", "paused")));
  srv->route("POST", "/v1/sandboxes/sb-1/resume", flaky(502, "", 1, view_running));
  srv->route("PUT", "/v1/sandboxes/sb-1/egress", flaky(500, "", 1, R"({"egress":["*"]})"));
  srv->route("PUT", "/v1/sandboxes/sb-1/files", flaky(503, "", 1, "null"));
  auto g = expect<sandbox_view>();
  cl->get("sb-1", 5s, g->cb());
  auto d = expect<sandbox_deleted>();
  cl->remove("sb-1", 5s, d->cb());
  auto p = expect<sandbox_view>();
  cl->pause("sb-1", 5s, p->cb());
  auto r = expect<sandbox_view>();
  cl->resume("sb-1", 5s, r->cb());
  auto e = expect<egress_body>();
  cl->put_egress("sb-1", egress_policy::allow_all(), 5s, e->cb());
  auto f = expect<bool>();
  cl->put_file("sb-1", "/x", "y", 5s, f->cb());
  EXPECT_TRUE(g->get());
  EXPECT_TRUE(d->get());
  EXPECT_TRUE(p->get());
  EXPECT_TRUE(r->get());
  EXPECT_TRUE(e->get());
  EXPECT_TRUE(f->get());
  EXPECT_EQ(srv->hits("GET", "/v1/sandboxes/sb-1"), 3u);
  EXPECT_EQ(srv->hits("DELETE", "/v1/sandboxes/sb-1"), 2u);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes/sb-1/pause"), 2u);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes/sb-1/resume"), 2u);
  EXPECT_EQ(srv->hits("PUT", "/v1/sandboxes/sb-1/egress"), 2u);
  EXPECT_EQ(srv->hits("PUT", "/v1/sandboxes/sb-1/files"), 2u);
}

TEST_F(cp_client, create_and_exec_are_never_retried) {
  srv->route("POST", "/v1/sandboxes", flaky(503, error_body("busy", 503), 1, created_json));
  srv->route("POST", "/v1/sandboxes/sb-1/exec",
             flaky(429, error_body("slow", 429), 1,
                   R"({"result":{"stdout":"","stderr":"","exit_code":0},"exec_ms":1})"));
  auto c = expect<sandbox_created>();
  cl->create(sandbox_create_request{"s", {}, {}, {}, {}, {}, false}, 5s, c->cb());
  auto created = c->get();
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ec::transient);
  EXPECT_NE(created.error().message.find("503"), std::string::npos);
  auto x = expect<exec_result>();
  cl->exec("sb-1", exec_request{"true", {}}, 5s, x->cb());
  auto ran = x->get();
  ASSERT_FALSE(ran);
  EXPECT_EQ(ran.error().code, ec::transient);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 1u);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes/sb-1/exec"), 1u);

  srv->route("POST", "/v1/sandboxes/sb-1/exec", flaky(503, "", 1, "{}"));
  auto s = expect<int32_t>();
  cp::exec_stream_callbacks cbs;
  cbs.on_done = s->cb();
  cl->exec_stream("sb-1", exec_request{"true", {}}, 5s, std::move(cbs));
  auto streamed = s->get();
  ASSERT_FALSE(streamed);
  EXPECT_EQ(streamed.error().code, ec::transient);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes/sb-1/exec"), 2u); // one more, not retried
}

TEST_F(cp_client, status_mapping_against_a_real_server) {
  srv->route("GET", "/v1/sandboxes/gone",
             [](exchange& ex) { ex.respond(404, fail_body("sandbox gone not found")); });
  srv->route("POST", "/v1/sandboxes/sb-1/exec",
             [](exchange& ex) { ex.respond(409, fail_body("sandbox is paused")); });
  srv->route("GET", "/v1/sandboxes/sb-1/files",
             [](exchange& ex) { ex.respond(409, fail_body("sandbox is paused")); });
  srv->route("POST", "/v1/sandboxes",
             [](exchange& ex) { ex.respond(409, fail_body("name gf-x already in use")); });
  srv->route("GET", "/v1/shapes",
             [](exchange& ex) { ex.respond(401, error_body("invalid api key", 401)); });
  auto nf = expect<sandbox_view>();
  cl->get("gone", 5s, nf->cb());
  auto paused = expect<exec_result>();
  cl->exec("sb-1", exec_request{"true", {}}, 5s, paused->cb());
  auto paused_file = expect<std::string>();
  cl->get_file("sb-1", "/workspace/x", 100, 5s, paused_file->cb());
  auto taken = expect<sandbox_created>();
  cl->create(sandbox_create_request{"s", {}, {}, {}, {}, {}, false}, 5s, taken->cb());
  auto denied = expect<shape_list>();
  cl->shapes(5s, denied->cb());

  auto r1 = nf->get();
  ASSERT_FALSE(r1);
  EXPECT_EQ(r1.error().code, ec::not_found);
  EXPECT_EQ(r1.error().message, "sandbox gone not found");
  auto r2 = paused->get();
  ASSERT_FALSE(r2);
  EXPECT_EQ(r2.error().code, ec::paused);
  auto r3 = paused_file->get();
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().code, ec::paused);
  auto r4 = taken->get();
  ASSERT_FALSE(r4);
  EXPECT_EQ(r4.error().code, ec::bad_request);
  EXPECT_EQ(r4.error().message, "name gf-x already in use");
  auto r5 = denied->get();
  ASSERT_FALSE(r5);
  EXPECT_EQ(r5.error().code, ec::unavailable);
  EXPECT_NE(r5.error().message.find("401"), std::string::npos);
  // None of these is transient: each was asked exactly once.
  EXPECT_EQ(srv->hits("GET", "/v1/sandboxes/gone"), 1u);
  EXPECT_EQ(srv->hits("GET", "/v1/shapes"), 1u);
  EXPECT_EQ(srv->hits("GET", "/v1/sandboxes/sb-1/files"), 1u);
}

TEST_F(cp_client, success_status_with_a_fail_envelope_is_transient) {
  srv->route("POST", "/v1/sandboxes",
             [](exchange& ex) { ex.respond(200, fail_body("quota exceeded")); });
  srv->route("GET", "/v1/whoami",
             [](exchange& ex) { ex.respond(200, error_body("internal", 500)); });
  auto c = expect<sandbox_created>();
  cl->create(sandbox_create_request{"s", {}, {}, {}, {}, {}, false}, 5s, c->cb());
  auto created = c->get();
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ec::transient);
  EXPECT_NE(created.error().message.find("quota exceeded"), std::string::npos);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 1u);
  // Idempotent: retried inside its deadline, then still transient.
  auto w = expect<whoami>();
  cl->who(400ms, w->cb());
  auto who = w->get();
  ASSERT_FALSE(who);
  EXPECT_EQ(who.error().code, ec::transient);
  EXPECT_GE(srv->hits("GET", "/v1/whoami"), 2u);
}

TEST_F(cp_client, a_success_in_another_envelope_form_decodes_the_same) {
  // The exact `{"status":"success","data":…}` form is decoded in one parse; any other
  // valid form (members reordered, spaced, extra members) goes through the full envelope
  // check and gives the same value.
  const std::string data =
      R"({"user_id":"u","stats":{"running":1,"paused":0,"other":0,"total":1}})";
  auto bodies = std::make_shared<std::vector<std::string>>(
      std::vector<std::string>{R"({"status":"success","data":)" + data + "}",
                               R"({"data":)" + data + R"(,"status":"success"})",
                               R"({"status":"success","data":)" + data + R"(,"x":{"y":2}})",
                               R"( {"status": "success", "data": )" + data + "} "});
  auto next = std::make_shared<std::atomic<size_t>>(0);
  srv->route("GET", "/v1/whoami",
             [bodies, next](exchange& ex) { ex.respond(200, (*bodies)[next->fetch_add(1)]); });
  for (size_t i = 0; i < bodies->size(); ++i) {
    auto w = expect<whoami>();
    cl->who(5s, w->cb());
    auto r = w->get();
    ASSERT_TRUE(r) << i << ": " << r.error().message;
    EXPECT_EQ(r->user_id, "u") << i;
    EXPECT_EQ(r->running, 1u) << i;
  }
  EXPECT_EQ(srv->hits("GET", "/v1/whoami"), bodies->size());
}

TEST_F(cp_client, an_exact_form_envelope_that_is_not_json_is_transient_and_retried) {
  // Looks like the exact form but is not one JSON document: the fast path must not take
  // it; the full check calls it a malformed envelope (transient, retried when idempotent).
  auto count = std::make_shared<std::atomic<int>>(0);
  srv->route("GET", "/v1/whoami", [count](exchange& ex) {
    if (count->fetch_add(1) == 0) {
      ex.respond(200, R"({"status":"success","data":{"user_id":"u"},})");
      return;
    }
    ex.success(R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  auto w = expect<whoami>();
  cl->who(5s, w->cb());
  auto r = w->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(srv->hits("GET", "/v1/whoami"), 2u);
}

TEST_F(cp_client, a_success_whose_data_does_not_fit_is_unavailable) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(R"({"user_id":42})"); });
  auto w = expect<whoami>();
  cl->who(5s, w->cb());
  auto r = w->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
}

TEST_F(cp_client, connection_refused_is_unavailable_after_the_deadline) {
  auto port = closed_port();
  auto c = make_client(at("http://127.0.0.1:" + std::to_string(port)), fast_config());
  auto started = std::chrono::steady_clock::now();
  auto g = expect<sandbox_view>();
  c->get("sb-1", 500ms, g->cb());
  auto r = g->get();
  auto took = std::chrono::steady_clock::now() - started;
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_NE(r.error().message.find("control plane at http://127.0.0.1:" + std::to_string(port) +
                                   " unreachable"),
            std::string::npos)
      << r.error().message;
  EXPECT_GE(took, 100ms); // it kept retrying inside the deadline instead of giving up at once
  // create is not retried, but is the same failure.
  auto k = expect<sandbox_created>();
  c->create(sandbox_create_request{"s", {}, {}, {}, {}, {}, false}, 300ms, k->cb());
  auto created = k->get();
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ec::unavailable);
}

TEST_F(cp_client, a_server_that_never_answers_hits_the_deadline) {
  auto never = srv->make_gate();
  srv->route("GET", "/v1/sandboxes/sb-1", [never](exchange&) { never->wait(); });
  srv->route("POST", "/v1/sandboxes/sb-1/exec", [never](exchange&) { never->wait(); });
  auto g = expect<sandbox_view>();
  cl->get("sb-1", 300ms, g->cb());
  auto x = expect<exec_result>();
  cl->exec("sb-1", exec_request{"sleep", {"100"}}, 300ms, x->cb());
  auto r = g->get(10s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  auto e = x->get(10s);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ec::transient);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes/sb-1/exec"), 1u);
}

TEST_F(cp_client, a_server_slow_to_send_the_body_hits_the_deadline) {
  auto never = srv->make_gate();
  srv->route("GET", "/v1/shapes", [never](exchange& ex) {
    ex.begin_sized(200, 100, "application/json");
    ex.raw(R"({"status":"succ)");
    never->wait();
  });
  auto o = expect<shape_list>();
  cl->shapes(300ms, o->cb());
  auto r = o->get(10s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
}

TEST_F(cp_client, connection_closed_mid_body_is_transient_and_retried_when_idempotent) {
  auto count = std::make_shared<std::atomic<int>>(0);
  srv->route("GET", "/v1/shapes", [count](exchange& ex) {
    if (count->fetch_add(1) == 0) {
      ex.begin_sized(200, 1000, "application/json");
      ex.raw(R"({"status":"success","da)");
      ex.close_now();
      return;
    }
    ex.success(R"({"data":[],"pagination":{"total":0}})");
  });
  srv->route("POST", "/v1/sandboxes", [](exchange& ex) {
    ex.begin_sized(200, 1000, "application/json");
    ex.raw(R"({"status":"success","da)");
    ex.close_now();
  });
  auto o = expect<shape_list>();
  cl->shapes(5s, o->cb());
  auto r = o->get();
  EXPECT_TRUE(r) << r.error().message;
  EXPECT_EQ(srv->hits("GET", "/v1/shapes"), 2u);
  auto c = expect<sandbox_created>();
  cl->create(sandbox_create_request{"s", {}, {}, {}, {}, {}, false}, 5s, c->cb());
  auto created = c->get();
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().code, ec::transient);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 1u);
}

TEST_F(cp_client, shutdown_completes_pending_calls_once_with_unavailable) {
  auto never = srv->make_gate();
  srv->route("GET", "/v1/sandboxes/sb-1", [never](exchange&) { never->wait(); });
  auto g = expect<sandbox_view>();
  cl->get("sb-1", 30s, g->cb());
  ASSERT_TRUE(srv->wait_until([&] { return srv->hits("GET", "/v1/sandboxes/sb-1") == 1; }));
  cl->shutdown();
  ASSERT_EQ(g->future.wait_for(0s), std::future_status::ready); // before shutdown returned
  auto r = g->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::unavailable);
  EXPECT_EQ(g->calls.load(), 1);
  // After shutdown: at once, on the calling thread.
  auto late = expect<sandbox_view>();
  cl->get("sb-1", 5s, late->cb());
  ASSERT_EQ(late->future.wait_for(0s), std::future_status::ready);
  EXPECT_EQ(late->get().error().code, ec::unavailable);
  EXPECT_EQ(late->thread, std::this_thread::get_id());
  cl->shutdown(); // idempotent
}

TEST_F(cp_client, dropping_the_client_inside_its_own_callback_is_safe) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  auto c = make_client(fast_config());
  std::promise<void> done;
  auto holder = std::make_shared<std::shared_ptr<cp::client>>(c);
  c->who(5s, [holder, &done](result<whoami>) {
    holder->reset(); // may be the last reference: shutdown runs on the client's own thread
    done.set_value();
  });
  c.reset();
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
}

TEST_F(cp_client, a_throwing_callback_does_not_kill_the_client) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  cl->who(5s, [](result<whoami>) { throw std::runtime_error("callback bug"); });
  auto o = expect<whoami>();
  cl->who(5s, o->cb());
  EXPECT_TRUE(o->get());
}
