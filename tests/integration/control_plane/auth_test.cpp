// API keys: every request needs X-Api-Key when a key is configured; a non-loopback
// address without a key is refused at start.
#include "tests/integration/control_plane/fixture.hpp"

namespace guestflow::testing {
namespace {

using control_plane_auth = control_plane_test;

void expect_unauthorized(const http_reply& r) {
  EXPECT_EQ(r.status, 401u) << r.body;
  auto env = decode<jsend>(r.body);
  ASSERT_TRUE(env) << r.body;
  EXPECT_EQ(env->status, jsend::kind::error);
  EXPECT_NE(r.body.find("X-Api-Key"), std::string::npos) << r.body;
}

TEST_F(control_plane_auth, every_request_needs_the_key) {
  stop();
  api_key_ = "s3cret-key";
  start({"--api-key", api_key_});
  http_client anonymous{cp_->port()};
  http_client wrong{cp_->port(), "s3cret-kez"};
  http_client shorter{cp_->port(), "s3cret"};
  for (const auto* c : {&anonymous, &wrong, &shorter}) {
    expect_unauthorized(c->call("GET", "/v1/shapes"));
    expect_unauthorized(c->call("GET", "/v1/sandboxes"));
    expect_unauthorized(c->call("GET", "/v1/nowhere"));
    expect_unauthorized(c->call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb"})"));
  }
  EXPECT_EQ(sandbox_total(), 0u) << "an unauthorized create must not create";
  EXPECT_EQ(call("GET", "/v1/shapes").status, 200u);
  create(R"({"shape":"s-1vcpu-256mb"})");
  EXPECT_EQ(sandbox_total(), 1u);
}

TEST_F(control_plane_auth, key_from_the_environment) {
  stop();
  api_key_ = "from-env";
  start({}, {{"GUESTFLOW_CONTROL_PLANE_KEY", api_key_}});
  expect_unauthorized(http_client{cp_->port()}.call("GET", "/v1/whoami"));
  EXPECT_EQ(call("GET", "/v1/whoami").status, 200u);
}

TEST_F(control_plane_auth, non_loopback_address_without_a_key_is_refused) {
  test_support::temp_dir other{"guestflow-cp-test"};
  auto o = control_plane_process::run_to_exit(
      {"control-plane", "--listen", "0.0.0.0:0", "--state-dir", (other.path() / "s").string()},
      {{"GUESTFLOW_CONTROL_PLANE_KEY", ""}});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.stderr_text.find("without an API key"), std::string::npos) << o.stderr_text;
  EXPECT_EQ(o.stdout_text, "");
}

} // namespace
} // namespace guestflow::testing
