// The keep-alive pool: reuse, and the one resend allowed when a pooled connection turns
// out to be closed by the server before it answered a single byte.
#include "messages/sandbox.hpp"
#include "tests/integration/client/client_fixture.hpp"
#include "tests/support/fds_exhausted.hpp"

using namespace gft;
using namespace guestflow;

namespace {

const std::string who_json =
    R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})";
const std::string created_json =
    R"({"id":"sb-1","name":"n","ip":"10.0.0.2","shape":"s","rootfs":"r","vcpu":1,"mem_mib":256,)"
    R"("disk_mib":1,"spawn_ms":1,"egress":["*"]})";

sandbox_create_request minimal() {
  sandbox_create_request r;
  r.shape = "s";
  return r;
}

} // namespace

TEST_F(cp_client, sequential_calls_reuse_one_connection) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(who_json); });
  for (int i = 0; i < 5; ++i) {
    auto o = expect<whoami>();
    cl->who(5s, o->cb());
    ASSERT_TRUE(o->get());
  }
  EXPECT_EQ(srv->connections(), 1u);
  auto reqs = srv->requests();
  ASSERT_EQ(reqs.size(), 5u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].connection, 0u);
    EXPECT_EQ(reqs[i].nth_on_connection, i);
  }
}

class cp_pool : public cp_client {
protected:
  /// A whoami whose connection the server closes right after the answer, unannounced (an
  /// idle timeout), then a create: it must be made exactly once, on a second connection.
  void create_after_an_unannounced_close(std::chrono::milliseconds peek_after) {
    auto cfg = fast_config();
    cfg.pool_peek_after = peek_after;
    cl->shutdown();
    cl = make_client(cfg);
    srv->route("GET", "/v1/whoami", [](exchange& ex) {
      ex.success(who_json);
      ex.close_now();
    });
    srv->route("POST", "/v1/sandboxes", [](exchange& ex) { ex.success(created_json); });
    auto o = expect<whoami>();
    cl->who(5s, o->cb());
    ASSERT_TRUE(o->get());
    // Wait until the server has really closed it: the client holds a dead pooled socket.
    ASSERT_TRUE(srv->wait_until([&] { return srv->closed_connections() == 1; }));
    auto c = expect<sandbox_created>();
    cl->create(minimal(), 5s, c->cb());
    auto r = c->get();
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 1u);
    EXPECT_EQ(srv->connections(), 2u);
  }
};

TEST_F(cp_pool, a_connection_the_server_closed_while_idle_is_not_reused) {
  // Peeked at before every reuse: the create notices the close before it is sent.
  create_after_an_unannounced_close(0ms);
}

TEST_F(cp_pool, a_connection_closed_right_after_its_answer_costs_one_resend_at_most) {
  // Reused within pool_peek_after, a connection is not peeked at: the dead one drops the
  // create unanswered, and it is resent once on a fresh connection.
  create_after_an_unannounced_close(60'000ms);
}

TEST_F(cp_client, stale_pooled_connection_is_resent_once_on_a_fresh_one) {
  // On connection 0 the second request is dropped without a byte of answer (the race
  // where the server closes an idle keep-alive connection as the request arrives).
  srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(who_json); });
  srv->route("POST", "/v1/sandboxes", [](exchange& ex) {
    if (ex.req.connection == 0 && ex.req.nth_on_connection > 0) return ex.close_now();
    ex.success(created_json);
  });
  auto o = expect<whoami>();
  cl->who(5s, o->cb());
  ASSERT_TRUE(o->get());
  auto c = expect<sandbox_created>();
  cl->create(minimal(), 5s, c->cb());
  auto r = c->get();
  ASSERT_TRUE(r) << r.error().message;
  auto reqs = srv->requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].connection, 0u); // the pooled one
  EXPECT_EQ(reqs[2].connection, 1u); // the one resend, fresh
  EXPECT_EQ(reqs[2].nth_on_connection, 0u);
}

TEST_F(cp_client, a_fresh_connection_closed_without_answer_is_not_resent) {
  srv->route("POST", "/v1/sandboxes", [](exchange& ex) { ex.close_now(); });
  auto c = expect<sandbox_created>();
  cl->create(minimal(), 5s, c->cb());
  auto r = c->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 1u);
}

TEST_F(cp_client, the_resend_happens_once_at_most) {
  // exec is dropped without an answer on every connection: the pooled attempt is resent
  // once on a fresh connection, and a drop there is final (a fresh connection proves the
  // server saw the request).
  srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(who_json); });
  auto exec_attempts = std::make_shared<std::atomic<int>>(0);
  srv->route("POST", "/v1/sandboxes/sb-1/exec", [exec_attempts](exchange& ex) {
    ++*exec_attempts;
    ex.close_now();
  });
  auto o = expect<whoami>();
  cl->who(5s, o->cb());
  ASSERT_TRUE(o->get());
  auto x = expect<exec_result>();
  cl->exec("sb-1", exec_request{"true", {}}, 5s, x->cb());
  auto r = x->get();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ec::transient);
  EXPECT_EQ(exec_attempts->load(), 2); // the pooled attempt + one fresh, never more
}

TEST_F(cp_client, connection_close_responses_are_not_pooled) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.respond(200, "{\"status\":\"success\",\"data\":" + who_json + "}", {}, false);
  });
  for (int i = 0; i < 3; ++i) {
    auto o = expect<whoami>();
    cl->who(5s, o->cb());
    ASSERT_TRUE(o->get());
  }
  EXPECT_EQ(srv->connections(), 3u);
}

TEST_F(cp_client, failed_answers_still_keep_the_connection) {
  srv->route("GET", "/v1/sandboxes/x",
             [](exchange& ex) { ex.respond(404, fail_body("no x")); });
  for (int i = 0; i < 3; ++i) {
    auto o = expect<sandbox_view>();
    cl->get("x", 5s, o->cb());
    EXPECT_EQ(o->get().error().code, ec::not_found);
  }
  EXPECT_EQ(srv->connections(), 1u);
}

TEST_F(cp_client, a_call_with_no_descriptor_left_waits_for_a_connection_in_use) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) { ex.success(who_json); });
  auto held = srv->make_gate();
  auto first_in = srv->make_gate();
  auto creates = std::make_shared<std::atomic<int>>(0);
  srv->route("POST", "/v1/sandboxes", [held, first_in, creates](exchange& ex) {
    if (creates->fetch_add(1) == 0) {
      first_in->open();
      held->wait();
    }
    ex.success(created_json);
  });
  auto first = expect<sandbox_created>();
  cl->create(minimal(), 10s, first->cb());
  ASSERT_TRUE(first_in->wait()); // the first create holds the only connection
  std::optional<guestflow::test_support::fds_exhausted> full{std::in_place};
  // The second needs a connection of its own and this process has no descriptor for one.
  auto second = expect<sandbox_created>();
  cl->create(minimal(), 10s, second->cb());
  // A rejection on the same (one) lane, after the second create's first attempt: once it
  // is in, that attempt has met EMFILE.
  auto marker = expect<sandbox_view>();
  cl->get("", 10s, marker->cb());
  ASSERT_FALSE(marker->get());
  EXPECT_EQ(second->calls.load(), 0) << "failed at once instead of waiting for a connection";
  held->open();
  ASSERT_TRUE(first->get());
  // Still no descriptor: the first create's connection was handed over.
  auto r = second->get();
  full.reset();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(srv->hits("POST", "/v1/sandboxes"), 2u);
  EXPECT_EQ(srv->connections(), 1u);
}
