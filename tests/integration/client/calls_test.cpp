// Every call of the wire API against a real loopback server: the request the server sees
// (method, path, query, headers, body) and the decoded reply.
#include "messages/sandbox.hpp"
#include "tests/integration/client/client_fixture.hpp"

using namespace gft;
using namespace guestflow;

TEST_F(cp_client, shapes_decodes_and_sends_key_and_user_agent) {
  srv->route("GET", "/v1/shapes", [](exchange& ex) {
    ex.success(
        R"({"data":[{"id":"s-1vcpu-256mb","vcpu":1,"mem_mib":256,"default_disk_mib":1024},)"
        R"({"id":"s-4vcpu-8gb","vcpu":4,"mem_mib":8192,"default_disk_mib":4096}],)"
        R"("pagination":{"total":2}})");
  });
  auto o = expect<shape_list>();
  cl->shapes(5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->data.size(), 2u);
  EXPECT_EQ(r->data[1].id, "s-4vcpu-8gb");
  EXPECT_EQ(r->data[1].mem_mib, 8192u);
  EXPECT_EQ(r->total, 2u);
  auto reqs = srv->requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].header("x-api-key"), "test-key");
  EXPECT_EQ(reqs[0].header("user-agent"), "guestflow/0.1");
  EXPECT_EQ(reqs[0].header("host"), "127.0.0.1:" + std::to_string(srv->port()));
  EXPECT_EQ(o->calls.load(), 1);
  EXPECT_NE(o->thread, std::this_thread::get_id()); // completes on a client thread
}

TEST_F(cp_client, no_api_key_header_without_a_key) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"u1","stats":{"running":1,"paused":2,"other":3,"total":6}})");
  });
  cp::endpoint ep;
  ep.base_url = srv->url();
  auto keyless = make_client(ep, fast_config());
  auto o = expect<whoami>();
  keyless->who(5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->user_id, "u1");
  EXPECT_EQ(r->paused, 2u);
  EXPECT_EQ(r->total, 6u);
  EXPECT_EQ(srv->requests().at(0).headers.count("x-api-key"), 0u);
}

TEST_F(cp_client, capabilities_local_and_createos) {
  capabilities local;
  local.isolation = "namespaces";
  local.max_timeout_seconds = 1234;
  srv->route("GET", "/v1/capabilities", [&](exchange& ex) { ex.success(encode(local)); });
  auto o = expect<capabilities>();
  cl->capabilities_of(5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(*r, local);

  // CreateOS has no such endpoint: the known facts, without a request.
  cp::endpoint ep;
  ep.base_url = srv->url();
  ep.kind = cp::provider::createos;
  auto createos = make_client(ep, fast_config());
  auto c = expect<capabilities>();
  createos->capabilities_of(5s, c->cb());
  auto facts = c->get();
  ASSERT_TRUE(facts);
  EXPECT_EQ(facts->isolation, "hardware-virtualized");
  EXPECT_FALSE(facts->supports_domain_allowlist);
  EXPECT_FALSE(facts->link_local_blocked);
  EXPECT_EQ(srv->hits("GET", "/v1/capabilities"), 1u);
}

TEST_F(cp_client, create_sends_the_request_and_decodes_the_guest) {
  sandbox_create_request req;
  req.shape = "s-1vcpu-256mb";
  req.name = "gf-b-abc123-0123456789";
  req.egress = egress_policy::deny_all();
  req.envs = {{"A", "1"}};
  req.auto_pause_after_seconds = 150;
  std::string seen_body, seen_type;
  srv->route("POST", "/v1/sandboxes", [&](exchange& ex) {
    seen_body = ex.req.body;
    seen_type = ex.req.header("content-type");
    ex.success(R"({"id":"sb-1","name":"gf-b-abc123-0123456789","ip":"10.0.0.2",)"
               R"("shape":"s-1vcpu-256mb","rootfs":"devbox:1","vcpu":1,"mem_mib":256,)"
               R"("disk_mib":1024,"spawn_ms":180,"egress":["240.0.0.0/4"]})");
  });
  auto o = expect<sandbox_created>();
  cl->create(req, 5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->id, "sb-1");
  EXPECT_EQ(r->spawn_ms, 180u);
  EXPECT_EQ(r->egress, egress_policy::deny_all());
  EXPECT_EQ(seen_type, "application/json");
  auto sent = decode<sandbox_create_request>(seen_body);
  ASSERT_TRUE(sent) << sent.error().message << " in " << seen_body;
  EXPECT_EQ(*sent, req);
}

TEST_F(cp_client, get_and_list_with_query_parameters) {
  srv->route("GET", "/v1/sandboxes/sb%2F1",
             [](exchange& ex) { ex.success(view_json("sb/1", "paused")); });
  srv->route("GET", "/v1/sandboxes", [](exchange& ex) {
    ex.success("{\"data\":[" + view_json("a", "running") + "," + view_json("b", "paused") +
               "],\"pagination\":{\"total\":7}}");
  });
  auto g = expect<sandbox_view>();
  cl->get("sb/1", 5s, g->cb()); // ids are percent-encoded as one path segment
  auto view = g->get();
  ASSERT_TRUE(view) << view.error().message;
  EXPECT_EQ(view->id, "sb/1");
  EXPECT_EQ(view->status, sandbox_status::paused);
  EXPECT_EQ(view->envs, std::vector<std::string>{"A"});

  auto l = expect<sandbox_list>();
  cl->list("running", 10, 20, 5s, l->cb());
  auto page = l->get();
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->data.size(), 2u);
  EXPECT_EQ(page->total, 7u);
  auto all = expect<sandbox_list>();
  cl->list("", 0, 0, 5s, all->cb());
  ASSERT_TRUE(all->get());
  auto reqs = srv->requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[1].query, "status=running&limit=10&offset=20");
  EXPECT_EQ(reqs[2].target, "/v1/sandboxes");
}

TEST_F(cp_client, put_and_get_file_with_an_encoded_path) {
  std::string stored;
  srv->route("PUT", "/v1/sandboxes/sb-1/files", [&](exchange& ex) {
    stored = ex.req.body;
    ex.success(R"({"path":"/workspace/a b&c=d.py","bytes":12})");
  });
  srv->route("GET", "/v1/sandboxes/sb-1/files", [&](exchange& ex) {
    ex.respond(200, stored, {{"Content-Type", "application/octet-stream"}});
  });
  std::string content("print(1)\0\xff\n", 11);
  auto p = expect<bool>();
  cl->put_file("sb-1", "/workspace/a b&c=d.py", content, 5s, p->cb());
  auto put = p->get();
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_TRUE(*put);
  auto g = expect<std::string>();
  cl->get_file("sb-1", "/workspace/a b&c=d.py", 1024, 5s, g->cb());
  auto got = g->get();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(*got, content);
  auto reqs = srv->requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].query, "path=/workspace/a%20b%26c%3Dd.py");
  EXPECT_EQ(reqs[0].header("content-type"), "application/octet-stream");
  EXPECT_EQ(reqs[1].query, reqs[0].query);
}

TEST_F(cp_client, a_body_of_two_pieces_goes_out_as_one) {
  // A flow run's bundle: the bytes every run shares, then the run's own spec.
  std::string stored, length;
  srv->route("PUT", "/v1/sandboxes/sb-1/files", [&](exchange& ex) {
    stored = ex.req.body;
    length = ex.req.header("content-length");
    ex.success(R"({"path":"/workspace/run/bundle","bytes":1})");
  });
  std::string head(70'000, 'h'); // more than one socket write's worth
  auto body = shared_bytes::joined(shared_bytes::of_static(head), "7 spec.json\n{\"a\":1}");
  auto p = expect<bool>();
  cl->put_file("sb-1", "/workspace/run/bundle", body, 5s, p->cb());
  auto put = p->get();
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_EQ(stored, head + "7 spec.json\n{\"a\":1}");
  EXPECT_EQ(length, std::to_string(body.size()));
}

TEST_F(cp_client, exec_buffered) {
  std::string seen;
  srv->route("POST", "/v1/sandboxes/sb-1/exec", [&](exchange& ex) {
    seen = ex.req.body;
    ex.success(R"({"result":{"stdout":"hi\n","stderr":"","exit_code":3},"exec_ms":12})");
  });
  exec_request req{"python3", {"-c", "print('hi')"}};
  auto o = expect<exec_result>();
  cl->exec("sb-1", req, 5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->stdout_text, "hi\n");
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->exec_ms, 12u);
  auto sent = decode<exec_request>(seen);
  ASSERT_TRUE(sent) << seen;
  EXPECT_EQ(*sent, req);
}

TEST_F(cp_client, egress_get_and_put) {
  std::string put_body;
  srv->route("GET", "/v1/sandboxes/sb-1/egress",
             [](exchange& ex) { ex.success(R"({"egress":["10.0.0.0/8:443","1.2.3.4"]})"); });
  srv->route("PUT", "/v1/sandboxes/sb-1/egress", [&](exchange& ex) {
    put_body = ex.req.body;
    ex.success(ex.req.body);
  });
  auto g = expect<egress_body>();
  cl->get_egress("sb-1", 5s, g->cb());
  auto got = g->get();
  ASSERT_TRUE(got) << got.error().message;
  EXPECT_EQ(got->egress.mode, egress_policy::kind::rules);
  EXPECT_EQ(got->egress.rules.size(), 2u);
  auto p = expect<egress_body>();
  cl->put_egress("sb-1", egress_policy::deny_all(), 5s, p->cb());
  auto put = p->get();
  ASSERT_TRUE(put) << put.error().message;
  EXPECT_EQ(put->egress, egress_policy::deny_all());
  auto sent = decode<egress_body>(put_body);
  ASSERT_TRUE(sent) << put_body;
  EXPECT_EQ(sent->egress, egress_policy::deny_all());
}

TEST_F(cp_client, pause_resume_and_delete) {
  srv->route("POST", "/v1/sandboxes/sb-1/pause",
             [](exchange& ex) { ex.success(view_json("sb-1", "paused")); });
  srv->route("POST", "/v1/sandboxes/sb-1/resume",
             [](exchange& ex) { ex.success(view_json("sb-1", "running")); });
  srv->route("DELETE", "/v1/sandboxes/sb-1",
             [](exchange& ex) { ex.success(R"({"id":"sb-1","status":"destroying"})"); });
  auto p = expect<sandbox_view>();
  cl->pause("sb-1", 5s, p->cb());
  auto paused = p->get();
  ASSERT_TRUE(paused) << paused.error().message;
  EXPECT_EQ(paused->status, sandbox_status::paused);
  auto r = expect<sandbox_view>();
  cl->resume("sb-1", 5s, r->cb());
  auto resumed = r->get();
  ASSERT_TRUE(resumed) << resumed.error().message;
  EXPECT_EQ(resumed->status, sandbox_status::running);
  auto d = expect<sandbox_deleted>();
  cl->remove("sb-1", 5s, d->cb());
  auto deleted = d->get();
  ASSERT_TRUE(deleted) << deleted.error().message;
  EXPECT_EQ(deleted->id, "sb-1");
  EXPECT_EQ(deleted->status, sandbox_status::destroying);
}

TEST_F(cp_client, invalid_arguments_fail_without_a_request) {
  auto g = expect<sandbox_view>();
  cl->get("", 5s, g->cb());
  auto rel = expect<bool>();
  cl->put_file("sb-1", "workspace/x.py", "x", 5s, rel->cb());
  auto nul = expect<std::string>();
  cl->get_file("sb-1", std::string("/a\0b", 4), 10, 5s, nul->cb());
  auto s = expect<int32_t>();
  cp::exec_stream_callbacks cbs;
  cbs.on_done = s->cb();
  auto h = cl->exec_stream("", exec_request{"true", {}}, 5s, std::move(cbs));
  ASSERT_NE(h, nullptr);
  h->cancel();
  for (auto code : {g->get().error().code, rel->get().error().code, nul->get().error().code,
                    s->get().error().code})
    EXPECT_EQ(code, ec::bad_request);
  EXPECT_EQ(s->calls.load(), 1);
  EXPECT_TRUE(srv->requests().empty());
}

TEST_F(cp_client, concurrent_calls_from_many_threads) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  auto cfg = fast_config();
  cfg.io_threads = 2;
  auto two = make_client(cfg);
  std::vector<std::shared_ptr<outcome<whoami>>> all(100);
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        auto o = expect<whoami>();
        all[static_cast<size_t>(t * 25 + i)] = o;
        two->who(10s, o->cb());
      }
    });
  for (auto& c : callers)
    c.join();
  for (auto& o : all) {
    auto r = o->get();
    EXPECT_TRUE(r) << r.error().message;
    EXPECT_EQ(o->calls.load(), 1);
  }
  EXPECT_EQ(srv->hits("GET", "/v1/whoami"), 100u);
  EXPECT_LE(srv->connections(), 100u);
}

TEST_F(cp_client, make_refuses_plain_http_off_loopback_and_bad_urls) {
  for (auto url : {"http://example.com", "http://10.0.0.1:8080", "http://169.254.169.254",
                   "http://[2001:db8::1]:80", "http://localhost.example.com"}) {
    auto c = cp::client::make(at(url));
    ASSERT_FALSE(c) << url;
    EXPECT_EQ(c.error().code, ec::policy_refused) << url;
  }
  for (auto url : {"ftp://127.0.0.1", "127.0.0.1:80", "http://"}) {
    auto c = cp::client::make(at(url));
    ASSERT_FALSE(c) << url;
    EXPECT_EQ(c.error().code, ec::bad_request) << url;
  }
  cp::client_config zero;
  zero.io_threads = 0;
  auto z = cp::client::make(at(srv->url()), zero);
  ASSERT_FALSE(z);
  EXPECT_EQ(z.error().code, ec::bad_request);
}

TEST_F(cp_client, localhost_name_is_plain_http_ok) {
  srv->route("GET", "/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"u","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  auto c = make_client(at("http://localhost:" + std::to_string(srv->port())), fast_config());
  ASSERT_NE(c, nullptr);
  auto o = expect<whoami>();
  c->who(5s, o->cb());
  auto r = o->get();
  EXPECT_TRUE(r) << r.error().message;
}

TEST_F(cp_client, base_url_prefix_is_kept) {
  srv->route("GET", "/api/v1/whoami", [](exchange& ex) {
    ex.success(R"({"user_id":"p","stats":{"running":0,"paused":0,"other":0,"total":0}})");
  });
  auto c = make_client(at(srv->url() + "/api/"), fast_config());
  auto o = expect<whoami>();
  c->who(5s, o->cb());
  auto r = o->get();
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->user_id, "p");
}
