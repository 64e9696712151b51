#include "bridge/server/routes.hpp"
#include "bridge/server/surfaces/surfaces.hpp"
#include "messages/http_status.hpp"

#include <gtest/gtest.h>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace guestflow;
using namespace guestflow::bridge;

namespace {

/// A handler that is never called: these tests only match.
void unused(exchange&, server_context&) {
  ADD_FAILURE() << "a matching test called a handler";
}

result<route_match> match_route(std::string_view method, std::string_view target) {
  return api_routes().match(method, target);
}

} // namespace

TEST(routes, match_every_endpoint_of_api_md) {
  struct row {
    const char* method;
    const char* target;
    endpoint ep;
    const char* id;
  };
  for (auto r : {row{"POST", "/v1/runs", endpoint::start_run, ""},
                 row{"GET", "/v1/runs/run-ab12/events", endpoint::run_events, "run-ab12"},
                 row{"DELETE", "/v1/runs/run-ab12", endpoint::cancel_run, "run-ab12"},
                 row{"POST", "/v1/sandbox/run", endpoint::sandbox_run, ""},
                 row{"POST", "/v1/components/run", endpoint::component_run, ""},
                 row{"GET", "/v1/capabilities", endpoint::capabilities, ""},
                 row{"GET", "/healthz", endpoint::healthz, ""},
                 row{"GET", "/metrics?x=1", endpoint::metrics, ""}}) {
    auto m = match_route(r.method, r.target);
    ASSERT_TRUE(m) << r.target;
    EXPECT_EQ(m->kind, route_match::outcome::found) << r.target;
    ASSERT_NE(m->target, nullptr) << r.target;
    EXPECT_EQ(m->target->ep, r.ep) << r.target;
    EXPECT_EQ(m->params.path("id"), r.id) << r.target;
  }
}

TEST(routes, read_from_seq_and_refuse_a_malformed_one) {
  auto m = match_route("GET", "/v1/runs/run-1/events?other=x&from_seq=42");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->params.number("from_seq"), 42u);
  EXPECT_EQ(match_route("GET", "/v1/runs/run-1/events")->params.number("from_seq"), 0u);
  for (auto bad :
       {"from_seq=", "from_seq=-1", "from_seq=1x", "from_seq=99999999999999999999"}) {
    auto r = match_route("GET", std::string{"/v1/runs/run-1/events?"} + bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
  }
  // Only a parameter named exactly from_seq counts.
  EXPECT_EQ(match_route("GET", "/v1/runs/run-1/events?from_seqx=5&from_seq")
                ->params.number("from_seq"),
            0u);
  EXPECT_EQ(match_route("GET", "/v1/runs/run-1/events?from_seq=1x").error().message,
            "from_seq: expected an integer in 0..18446744073709551615, got '1x'");
}

TEST(routes, tell_an_unknown_path_from_a_wrong_method) {
  EXPECT_EQ(match_route("GET", "/v1/nothing")->kind, route_match::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs/../../etc")->kind, route_match::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs/a%20b")->kind, route_match::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs//events")->kind, route_match::outcome::not_found);
  auto m = match_route("GET", "/v1/sandbox/run");
  EXPECT_EQ(m->kind, route_match::outcome::method_not_allowed);
  EXPECT_EQ(m->allow, "POST");
  EXPECT_EQ(match_route("POST", "/v1/runs/run-1")->allow, "DELETE");
}

TEST(routes, keep_trailing_slashes_and_nested_ids_apart) {
  for (const std::string& target :
       std::vector<std::string>{"/v1/runs/", "/v1/runs/x/events/", "/v1/runs/a/b/events",
                                "//healthz", "/healthz/", "/v1/runs/" + std::string(65, 'a')})
    EXPECT_EQ(match_route("DELETE", target)->kind, route_match::outcome::not_found) << target;
  // A method check never parses the query of a route it does not pick.
  auto wrong = match_route("POST", "/v1/runs/run-1/events?from_seq=x");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->allow, "GET");
  // 64 characters is still an id.
  auto longest = match_route("DELETE", "/v1/runs/" + std::string(64, 'a'));
  EXPECT_EQ(longest->kind, route_match::outcome::found);
}

TEST(routes, every_endpoint_is_registered_once_and_only_healthz_is_open) {
  std::set<endpoint> seen;
  for (auto& r : api_routes().routes()) {
    // The session API's routes share one label in /metrics, as the service URLs' do.
    EXPECT_TRUE(seen.insert(r.ep).second || r.ep == endpoint::sessions ||
                r.ep == endpoint::ports)
        << label(r.ep) << " registered twice";
    EXPECT_EQ(r.open, r.ep == endpoint::healthz) << r.pattern;
    EXPECT_TRUE(static_cast<bool>(r.handler)) << r.pattern;
    EXPECT_NE(label(r.ep), "unknown");
  }
  EXPECT_EQ(seen.size(), endpoint_count);
}

TEST(route_table, lists_every_method_of_a_path_in_allow) {
  route_table t;
  t.add("GET", "/v1/things/{name}", endpoint::capabilities, unused);
  t.add("DELETE", "/v1/things/{name}", endpoint::cancel_run, unused);
  t.add("PUT", "/v1/things/{name}/{part}", endpoint::metrics, unused);
  auto m = t.match("POST", "/v1/things/box");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, route_match::outcome::method_not_allowed);
  EXPECT_EQ(m->allow, "GET, DELETE");
  auto d = t.match("DELETE", "/v1/things/box");
  ASSERT_EQ(d->kind, route_match::outcome::found);
  EXPECT_EQ(d->target->ep, endpoint::cancel_run);
  EXPECT_EQ(d->params.path("name"), "box");
  auto two = t.match("PUT", "/v1/things/box/lid?x=1");
  ASSERT_EQ(two->kind, route_match::outcome::found);
  EXPECT_EQ(two->params.path("name"), "box");
  EXPECT_EQ(two->params.path("part"), "lid");
  EXPECT_EQ(two->params.path("other"), "");
}

TEST(route_table, picks_the_first_registered_route_that_fits) {
  route_table t;
  t.add("GET", "/v1/runs/latest", endpoint::metrics, unused);
  t.add("GET", "/v1/runs/{id}", endpoint::run_events, unused);
  EXPECT_EQ(t.match("GET", "/v1/runs/latest")->target->ep, endpoint::metrics);
  EXPECT_EQ(t.match("GET", "/v1/runs/run-1")->target->ep, endpoint::run_events);
}

TEST(route_table, refuses_a_route_registered_twice) {
  route_table t;
  t.add("GET", "/healthz", endpoint::healthz, unused);
  EXPECT_THROW(t.add("GET", "/healthz", endpoint::metrics, unused), std::logic_error);
  EXPECT_NO_THROW(t.add("POST", "/healthz", endpoint::metrics, unused));
}

TEST(status, maps_each_error_code_as_api_md_says) {
  EXPECT_EQ(http_status(ec::bad_request), 400u);
  EXPECT_EQ(http_status(ec::policy_refused), 403u);
  EXPECT_EQ(http_status(ec::not_found), 404u);
  EXPECT_EQ(http_status(ec::paused), 409u);
  EXPECT_EQ(http_status(ec::egress_drift), 409u);
  EXPECT_EQ(http_status(ec::cancelled), 409u);
  EXPECT_EQ(http_status(ec::artifact_too_large), 413u);
  EXPECT_EQ(http_status(ec::capacity), 429u);
  EXPECT_EQ(http_status(ec::guest_failed), 502u);
  EXPECT_EQ(http_status(ec::unavailable), 503u);
  EXPECT_EQ(http_status(ec::transient), 503u);
  EXPECT_EQ(http_status(ec::timeout), 504u);
  EXPECT_EQ(http_status(ec::oom), 507u);
}

TEST(status, gives_every_code_a_row_of_its_own) {
  for (auto i = 1; i <= static_cast<int>(last_ec); ++i) {
    auto s = http_status(static_cast<ec>(i));
    EXPECT_GE(s, 400u) << to_string(static_cast<ec>(i));
    EXPECT_NE(s, 500u) << to_string(static_cast<ec>(i)) << " fell through the table";
  }
}
