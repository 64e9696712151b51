#include "bridge/server/routes.hpp"
#include "bridge/server/status.hpp"

#include <gtest/gtest.h>

using namespace guestflow;
using namespace guestflow::bridge;

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
    EXPECT_EQ(m->kind, route::outcome::found) << r.target;
    EXPECT_EQ(m->ep, r.ep) << r.target;
    EXPECT_EQ(m->run_id, r.id) << r.target;
  }
}

TEST(routes, read_from_seq_and_refuse_a_malformed_one) {
  auto m = match_route("GET", "/v1/runs/run-1/events?other=x&from_seq=42");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->from_seq, 42u);
  EXPECT_EQ(match_route("GET", "/v1/runs/run-1/events")->from_seq, 0u);
  for (auto bad :
       {"from_seq=", "from_seq=-1", "from_seq=1x", "from_seq=99999999999999999999"}) {
    auto r = match_route("GET", std::string{"/v1/runs/run-1/events?"} + bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
  }
}

TEST(routes, tell_an_unknown_path_from_a_wrong_method) {
  EXPECT_EQ(match_route("GET", "/v1/nothing")->kind, route::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs/../../etc")->kind, route::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs/a%20b")->kind, route::outcome::not_found);
  EXPECT_EQ(match_route("GET", "/v1/runs//events")->kind, route::outcome::not_found);
  auto m = match_route("GET", "/v1/sandbox/run");
  EXPECT_EQ(m->kind, route::outcome::method_not_allowed);
  EXPECT_EQ(m->allow, "POST");
  EXPECT_EQ(match_route("POST", "/v1/runs/run-1")->allow, "DELETE");
}

TEST(status, maps_each_error_code_as_api_md_says) {
  EXPECT_EQ(http_status(ec::bad_request), 400u);
  EXPECT_EQ(http_status(ec::policy_refused), 403u);
  EXPECT_EQ(http_status(ec::not_found), 404u);
  EXPECT_EQ(http_status(ec::paused), 409u);
  EXPECT_EQ(http_status(ec::egress_drift), 409u);
  EXPECT_EQ(http_status(ec::artifact_too_large), 413u);
  EXPECT_EQ(http_status(ec::capacity), 429u);
  EXPECT_EQ(http_status(ec::guest_failed), 502u);
  EXPECT_EQ(http_status(ec::unavailable), 503u);
  EXPECT_EQ(http_status(ec::transient), 503u);
  EXPECT_EQ(http_status(ec::timeout), 504u);
  EXPECT_EQ(http_status(ec::oom), 507u);
}
