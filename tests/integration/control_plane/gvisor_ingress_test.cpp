// Service URLs and gVisor guests (issues 40 and 42), with real runsc sandboxes: the proxy
// reaches a guest's port through the guest's netns loopback, which a gVisor guest does not
// use (its loopback is the Sentry's own), so a create asking for both is refused
// `unavailable` with nothing made, and the ports route of a gVisor guest whose record says
// ingress (one from before the refusal, made here by editing the stopped server's record)
// answers the same typed refusal instead of a misleading 502 guest_port_closed.
#include "controlplane/local/store/record_store.hpp"
#include "tests/integration/control_plane/fixture.hpp"

#include <filesystem>

namespace guestflow::testing {
namespace {

using control_plane_gvisor_ingress = control_plane_test;
namespace fs = std::filesystem;

const std::string key = "k-gvisor-ingress-test";

class gvisor_ingress_fixture : public control_plane_gvisor_ingress {
protected:
  void SetUp() override {
    state_dir_ = dir_.path() / "state";
    api_key_ = key;
    start({"--api-key", key});
    auto caps = call("GET", "/v1/capabilities");
    if (caps.body.find("\"gvisor\"") == std::string::npos)
      GTEST_SKIP() << "this control plane offers no gVisor guests: " << caps.body;
  }

  /// Entries under state_dir/gvisor (one per gVisor guest the backend built).
  size_t gvisor_dirs() const {
    auto dir = state_dir_ / "gvisor";
    if (!fs::exists(dir)) return 0;
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir))
      ++n;
    return n;
  }

  /// `unavailable` on the wire (503, a JSend error) naming the gVisor refusal.
  static void expect_gvisor_refusal(const http_reply& r) {
    expect_refusal(r, 503, "service URLs are not available for gVisor guests");
  }
};

TEST_F(gvisor_ingress_fixture, a_create_asking_for_both_is_refused_and_makes_nothing) {
  const auto before = sandbox_total();
  const auto workspaces = workspace_count();
  const auto sandboxes = gvisor_dirs();
  for (const char* egress : {R"("egress":["240.0.0.0/4"],)", ""}) { // deny-all and networked
    auto r = call("POST", "/v1/sandboxes",
                  std::string{R"({"shape":"s-1vcpu-256mb","isolation":"gvisor",)"} + egress +
                      R"("ingress_enabled":true})");
    expect_gvisor_refusal(r);
  }
  auto persistent = call("POST", "/v1/sandboxes",
                         R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","persistent":true,)"
                         R"("ingress_enabled":true})");
  expect_gvisor_refusal(persistent);
  EXPECT_EQ(sandbox_total(), before);
  EXPECT_EQ(workspace_count(), workspaces);
  EXPECT_EQ(gvisor_dirs(), sandboxes);
  // The same create without service URLs, or namespaces with them, is made.
  auto plain =
      create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  EXPECT_FALSE(plain.id.empty());
  auto ns =
      create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"ingress_enabled":true})");
  EXPECT_FALSE(ns.ingress_secret.empty());
}

TEST_F(gvisor_ingress_fixture, the_ports_route_of_a_gvisor_guest_answers_the_refusal_not_502) {
  auto g = create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  ASSERT_FALSE(g.id.empty());
  // Something listens on the guest's loopback: the answer is not about the port.
  auto r = exec(g.id, "/bin/sh",
                {"-c", "setsid python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 "
                       "</dev/null &"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;

  // Its record made to say ingress while the server is down (the guest keeps running).
  ASSERT_EQ(stop(), 0);
  const std::string secret = "gvisor-ingress-test-secret-0123456789abcdefghi";
  {
    auto store = local::record_store::open(state_dir_ / "control-plane.db");
    ASSERT_TRUE(store) << store.error().message;
    auto all = (*store)->load_all();
    ASSERT_TRUE(all) << all.error().message;
    bool found = false;
    for (auto rec : *all)
      if (rec.id == g.id) {
        found = true;
        rec.ingress_enabled = true;
        rec.ingress_secret = secret;
        ASSERT_TRUE((*store)->put(rec));
      }
    ASSERT_TRUE(found);
  }
  start({"--api-key", key});
  ASSERT_EQ(view(g.id).status, sandbox_status::running);

  const std::string url = "/v1/sandboxes/" + g.id + "/ports/8000/";
  auto with_token =
      http_client{cp_->port()}.call("GET", url, {}, {{"X-Guestflow-Ingress-Token", secret}});
  expect_gvisor_refusal(with_token);
  EXPECT_EQ(with_token.body.find("guest_port_closed"), std::string::npos) << with_token.body;
  expect_gvisor_refusal(call("GET", url)); // with the API key
  // A wrong token is still 401: the refusal tells only its holders about the guest.
  auto wrong =
      http_client{cp_->port()}.call("GET", url, {}, {{"X-Guestflow-Ingress-Token", "nope"}});
  EXPECT_EQ(wrong.status, 401u) << wrong.body;
  // The guest is untouched by it.
  EXPECT_EQ(exec(g.id, "/bin/true").exit_code, 0);
}

} // namespace
} // namespace guestflow::testing
