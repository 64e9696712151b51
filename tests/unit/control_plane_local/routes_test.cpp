#include "controlplane/local/http/routes.hpp"
#include "controlplane/local/service/simulated_control_plane.hpp"
#include "messages/jsend.hpp"

#include <gtest/gtest.h>
#include <variant>

namespace guestflow::local {
namespace {

TEST(local_routes, match_endpoints_with_ids) {
  auto r = match_route("POST", "/v1/sandboxes/sb-1/exec");
  ASSERT_EQ(r.kind, route::outcome::found);
  EXPECT_EQ(r.ep, endpoint::exec);
  EXPECT_EQ(r.id, "sb-1");
  EXPECT_EQ(match_route("GET", "/v1/sandboxes/").ep, endpoint::list_sandboxes);
  EXPECT_EQ(match_route("PUT", "/v1/sandboxes/x/files").ep, endpoint::put_file);
  EXPECT_EQ(match_route("DELETE", "/v1/sandboxes/x").ep, endpoint::delete_sandbox);
}

TEST(local_routes, distinguish_404_from_405) {
  EXPECT_EQ(match_route("GET", "/v1/sandboxes/x/nope").kind, route::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/sandboxes//exec").kind, route::outcome::not_found);
  auto r = match_route("PATCH", "/v1/sandboxes/x/egress");
  EXPECT_EQ(r.kind, route::outcome::method_not_allowed);
  EXPECT_EQ(r.allow, "GET, PUT");
}

TEST(local_routes, targets_are_percent_decoded) {
  auto t = parse_target("/v1/sandboxes/a/files?path=%2Fworkspace%2Fa%20b+c&x");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, "/v1/sandboxes/a/files");
  EXPECT_EQ(t->query.at("path"), "/workspace/a b c");
  EXPECT_EQ(t->query.at("x"), "");
  EXPECT_EQ(parse_target("/v1/x?path=%00")->query.at("path"), std::string(1, '\0'));
  EXPECT_FALSE(parse_target("/v1/x?path=%zz"));
  EXPECT_FALSE(parse_target("/v1/x?path=%4"));
  EXPECT_FALSE(parse_target("v1/x"));
}

TEST(local_routes, list_query_is_validated) {
  auto q = parse_list_query({{"status", "paused"}, {"limit", "5"}, {"offset", "10"}});
  ASSERT_TRUE(q);
  EXPECT_EQ(q->status, sandbox_status::paused);
  EXPECT_EQ(q->limit, 5u);
  EXPECT_EQ(q->offset, 10u);
  EXPECT_FALSE(parse_list_query({{"limit", "-1"}}));
  EXPECT_FALSE(parse_list_query({{"limit", "5000"}}));
  EXPECT_FALSE(parse_list_query({{"status", "asleep"}}));
  EXPECT_TRUE(*parse_stream_flag({{"stream", "true"}}));
  EXPECT_FALSE(*parse_stream_flag({}));
  EXPECT_FALSE(parse_stream_flag({{"stream", "yes please"}}));
}

TEST(local_routes, a_table_routes_by_method_and_pattern_and_lists_methods_in_order) {
  route_table t;
  auto answer = [](unsigned status) {
    return handler{body_mode::whole, [status](const handler_request&) -> action {
                     return reply{status, "{}"};
                   }};
  };
  t.add("GET", "/v1/things/{id}", endpoint::get_sandbox, answer(201));
  t.add("DELETE", "/v1/things/{id}", endpoint::delete_sandbox, answer(202));
  t.add("PUT", "/v1/things/{id}/blob", endpoint::put_file,
        {body_mode::streamed, [](const handler_request&) -> action { return reply{}; }});
  auto r = t.match("DELETE", "/v1/things/a%2Fb/");
  ASSERT_EQ(r.kind, route::outcome::found);
  EXPECT_EQ(r.ep, endpoint::delete_sandbox);
  EXPECT_EQ(r.id, "a%2Fb"); // matching sees the path as given (parse_target decodes first)
  ASSERT_NE(r.target, nullptr);
  EXPECT_EQ(r.target->body, body_mode::whole);
  simulated_control_plane svc{std::chrono::milliseconds{0}, ""};
  std::map<std::string, std::string> query;
  auto a = r.target->handle({r.id, query, {}, svc, http_options{}});
  ASSERT_TRUE(std::holds_alternative<reply>(a));
  EXPECT_EQ(std::get<reply>(a).status, 202u);
  auto wrong = t.match("POST", "/v1/things/x");
  EXPECT_EQ(wrong.kind, route::outcome::method_not_allowed);
  EXPECT_EQ(wrong.allow, "GET, DELETE");
  EXPECT_EQ(wrong.target, nullptr);
  EXPECT_EQ(t.match("PUT", "/v1/things/x/blob").target->body, body_mode::streamed);
  EXPECT_EQ(t.match("GET", "/v1/things").kind, route::outcome::not_found);
  EXPECT_EQ(t.match("GET", "/v1/things//").kind, route::outcome::not_found);
}

/// The wire API's handlers, called without any HTTP: they validate the request and say
/// what the transport is to do.
class wire_handlers : public ::testing::Test {
protected:
  action call(std::string_view method, std::string_view target, std::string_view body = {}) {
    auto t = parse_target(target);
    EXPECT_TRUE(t);
    query = t->query;
    auto r = match_route(method, t->path);
    EXPECT_EQ(r.kind, route::outcome::found) << method << " " << target;
    return r.target->handle({r.id, query, body, svc, options});
  }

  static reply answered(action a) {
    if (auto* d = std::get_if<domain_call>(&a)) return d->run();
    EXPECT_TRUE(std::holds_alternative<reply>(a)) << "index " << a.index();
    return std::holds_alternative<reply>(a) ? std::get<reply>(a) : reply{};
  }

  simulated_control_plane svc{std::chrono::milliseconds{0}, ""};
  http_options options;
  std::map<std::string, std::string> query;
};

TEST_F(wire_handlers, domain_calls_answer_jsend_success_or_the_failure_status) {
  auto shapes = call("GET", "/v1/shapes");
  ASSERT_TRUE(std::holds_alternative<domain_call>(shapes));
  auto ok = answered(std::move(shapes));
  EXPECT_EQ(ok.status, 200u);
  EXPECT_EQ(ok.body.rfind(R"({"status":"success","data":)", 0), 0u) << ok.body;
  auto missing = answered(call("GET", "/v1/sandboxes/sb-nope"));
  EXPECT_EQ(missing.status, 404u) << missing.body;
}

TEST_F(wire_handlers, requests_they_refuse_are_answered_at_once) {
  auto bad_limit = call("GET", "/v1/sandboxes?limit=5000");
  ASSERT_TRUE(std::holds_alternative<reply>(bad_limit));
  EXPECT_EQ(std::get<reply>(bad_limit).status, 400u);
  EXPECT_EQ(std::get<reply>(bad_limit).body,
            jsend_fail("limit: expected an integer from 0 to 1000, got '5000'"));
  auto bad_body = call("POST", "/v1/sandboxes", "{not json");
  ASSERT_TRUE(std::holds_alternative<reply>(bad_body));
  EXPECT_EQ(std::get<reply>(bad_body).status, 400u);
  auto no_path = call("GET", "/v1/sandboxes/sb-1/files");
  ASSERT_TRUE(std::holds_alternative<reply>(no_path));
  EXPECT_EQ(std::get<reply>(no_path).body,
            jsend_fail("path: the query parameter ?path=/absolute/path/in/guest is required"));
  auto bad_stream = call("POST", "/v1/sandboxes/sb-1/exec?stream=maybe", R"({"cmd":"true"})");
  ASSERT_TRUE(std::holds_alternative<reply>(bad_stream));
  EXPECT_EQ(std::get<reply>(bad_stream).status, 400u);
}

TEST_F(wire_handlers, exec_and_files_are_handed_to_the_transport) {
  auto streamed = call("POST", "/v1/sandboxes/sb-1/exec?stream=true", R"({"cmd":"true"})");
  ASSERT_TRUE(std::holds_alternative<exec_call>(streamed));
  EXPECT_TRUE(std::get<exec_call>(streamed).streaming);
  auto buffered = call("POST", "/v1/sandboxes/sb-1/exec", R"({"cmd":"true"})");
  ASSERT_TRUE(std::holds_alternative<exec_call>(buffered));
  EXPECT_FALSE(std::get<exec_call>(buffered).streaming);
  EXPECT_TRUE(std::holds_alternative<file_download>(
      call("GET", "/v1/sandboxes/sb-1/files?path=/workspace/x")));
  auto up = call("PUT", "/v1/sandboxes/sb-1/files?path=/workspace/y");
  ASSERT_TRUE(std::holds_alternative<file_upload>(up));
  EXPECT_EQ(std::get<file_upload>(up).path, "/workspace/y");
  EXPECT_EQ(match_route("PUT", "/v1/sandboxes/sb-1/files").target->body, body_mode::streamed);
}

} // namespace
} // namespace guestflow::local
