// Service URLs on CreateOS (bridge/API.md, "Service URLs"): serve in front of a CreateOS
// stand-in (createos/stand_in.hpp: a real local control plane and real guests behind it,
// CreateOS's documented ingress fields on its answers) hands back CreateOS's own URL for a
// port, in the SDK's format, and a typed error for a guest CreateOS gives none — once the
// operator opted in (GUESTFLOW_CREATEOS_PUBLIC_INGRESS): by default no guest is created with
// ingress there, and both ports routes say how to turn it on without asking CreateOS.

#include "messages/jsend.hpp"
#include "messages/json_codec.hpp"
#include "messages/sandbox.hpp"
#include "tests/integration/bridge/bridge_fixture.hpp"
#include "tests/integration/bridge/createos/stand_in.hpp"
#include "tests/support/eventually.hpp"

#include <gtest/gtest.h>
#include <regex>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* domain = "sb.stand-in.invalid";

class createos_ports : public bridge_fixture {
protected:
  std::unique_ptr<createos_stand_in> createos;

  /// GUESTFLOW_CREATEOS_PUBLIC_INGRESS on serve ("" = unset: the default).
  virtual std::string public_ingress() const { return "true"; }

  /// serve's environment in front of the stand-in.
  std::map<std::string, std::string> createos_env() const {
    std::map<std::string, std::string> e{
        // No local control plane named: the CreateOS key selects CreateOS at the stand-in.
        {"GUESTFLOW_CONTROL_PLANE_URL", ""},
        {"CREATEOS_SANDBOX_API_KEY", "stand-in-key"},
        {"CREATEOS_SANDBOX_BASE_URL", createos->url()},
        // CreateOS's deny-all keeps the metadata address open (DESIGN.md).
        {"LANGFLOW_SANDBOX_CREATEOS_ACCEPT_EGRESS_EXCEPTIONS", "true"},
        // The stand-in's rootfs catalog is the local control plane's images.
        {"CREATEOS_SANDBOX_ROOTFS", "debian:12"}};
    if (!public_ingress().empty()) e["GUESTFLOW_CREATEOS_PUBLIC_INGRESS"] = public_ingress();
    return e;
  }

  void SetUp() override {
    runtime_fixture::SetUp();
    createos = std::make_unique<createos_stand_in>(cp->port(), domain);
    start_serve(createos_env());
  }

  void TearDown() override {
    if (serve) serve->stop();
    runtime_fixture::TearDown();
  }

  /// A new session: its id and its guest's id.
  std::pair<std::string, std::string> session(const std::string& thread) {
    auto r =
        call("POST", "/v1/sessions", R"({"user_id":"alice","thread_id":")" + thread + "\"}");
    EXPECT_EQ(r.status, 200u) << r.body << "\n" << serve->stderr_text();
    std::smatch s, g;
    EXPECT_TRUE(std::regex_search(r.body, s, std::regex{R"re("session_id":"([^"]+)")re"}));
    EXPECT_TRUE(std::regex_search(r.body, g, std::regex{R"re("sandbox":\{"id":"([^"]+)")re"}));
    return {s[1].str(), g[1].str()};
  }

  /// The create bodies serve sent to CreateOS.
  std::vector<std::string> creates() const {
    std::vector<std::string> out;
    for (auto& r : createos->requests())
      if (r.method == "POST" && r.path == "/v1/sandboxes") out.push_back(r.body);
    return out;
  }

  /// The URL CreateOS's SDK builds with previewUrl(port, {scheme: "http"}) from the
  /// template CreateOS gave guest `id` (SOURCES.md).
  static std::string sdk_url(const std::string& id, uint16_t port) {
    auto t = createos_stand_in::template_for(id, domain);
    t.replace(t.find("<port>"), 6, std::to_string(port));
    return "http:" + t.substr(6);
  }

  /// Requests to CreateOS from index `from` on that read guest `id`'s view.
  size_t views_of(const std::string& id, size_t from = 0) const {
    auto all = createos->requests();
    size_t n = 0;
    for (size_t i = from; i < all.size(); ++i)
      n += all[i].method == "GET" && all[i].path == "/v1/sandboxes/" + id;
    return n;
  }

  /// The name of the guest a reuse: "flow" component run of flow `flow` kept, or "" (the
  /// failure said) when the run gave none.
  std::string reuse_flow_guest(const std::string& flow) {
    auto run = call("POST", "/v1/components/run",
                    R"({"flow_id":")" + flow +
                        R"(","component_id":"c1","reuse":"flow",)"
                        R"("program":"print('kept')\n"})");
    EXPECT_EQ(run.status, 200u) << run.body << "\n" << serve->stderr_text();
    std::smatch m;
    if (run.status != 200u ||
        !std::regex_search(run.body, m, std::regex{R"re("guest":"(gf-c-[^"]+)")re"})) {
      ADD_FAILURE() << "no reuse guest in " << run.body;
      return "";
    }
    return m[1].str();
  }

  /// The control plane's id of live guest `name`, or "".
  std::string live_id(const std::string& name) {
    for (auto& g : live_guests())
      if (g.name == name) return g.id;
    return "";
  }

  /// Whether serve asked CreateOS for guest `name`; each such create must ask `ingress`.
  bool created_with_ingress(const std::string& name, bool ingress) const {
    bool created = false;
    for (auto& body : creates())
      if (body.find("\"name\":\"" + name + "\"") != std::string::npos) {
        created = true;
        EXPECT_NE(body.find(ingress ? "\"ingress_enabled\":true" : "\"ingress_enabled\":false"),
                  std::string::npos)
            << body;
      }
    return created;
  }

  /// A guest made at CreateOS directly (as a reuse: "flow" run leaves one), by name.
  std::string guest_at_createos(const std::string& name, bool ingress) {
    auto shapes = decode<shape_list>(
        decode<jsend>(http_client{cp->port()}.call("GET", "/v1/shapes").body)->data.text);
    EXPECT_TRUE(shapes && !shapes->data.empty());
    sandbox_create_request c;
    c.shape = shapes->data.at(0).id;
    c.name = name;
    c.ingress_enabled = ingress;
    auto port = static_cast<uint16_t>(std::stoi(createos->url().substr(17)));
    auto r = http_client{port}.call("POST", "/v1/sandboxes", encode(c),
                                    {{"Content-Type", "application/json"}});
    EXPECT_EQ(r.status / 100, 2u) << r.body;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.body, m, std::regex{R"re("id":"([^"]+)")re"})) << r.body;
    return m[1].str();
  }
};

TEST_F(createos_ports, a_session_port_gets_createos_url_in_the_sdk_format) {
  auto [id, guest] = session("ports");
  ASSERT_FALSE(guest.empty());
  auto sent = creates();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].find("\"ingress_enabled\":true"), std::string::npos) << sent[0];

  auto r = call("POST", "/v1/sessions/" + id + "/ports/8080");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, R"({"url":")" + sdk_url(guest, 8080) + R"(","expires_at":null})");
  EXPECT_EQ(r.body.find("<port>"), std::string::npos);
  // Read from CreateOS at the time of asking: its view of that guest.
  size_t views = 0;
  for (auto& q : createos->requests())
    views += q.method == "GET" && q.path == "/v1/sandboxes/" + guest;
  EXPECT_GE(views, 1u);
  auto other = call("POST", "/v1/sessions/" + id + "/ports/1");
  ASSERT_EQ(other.status, 200u) << other.body;
  EXPECT_EQ(other.body, R"({"url":")" + sdk_url(guest, 1) + R"(","expires_at":null})");

  // CreateOS's URLs do not expire: a shorter life is refused, not dropped.
  auto ttl = call("POST", "/v1/sessions/" + id + "/ports/8080", R"({"ttl_seconds":60})");
  EXPECT_EQ(ttl.status, 400u) << ttl.body;
  EXPECT_NE(ttl.body.find("do not expire"), std::string::npos) << ttl.body;
  EXPECT_EQ(call("POST", "/v1/sessions/" + id + "/ports/0").status, 400u);
  EXPECT_EQ(call("POST", "/v1/sessions/gf-s-nosuchsession0000/ports/8080").status, 404u);

  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200u);
  EXPECT_TRUE(test_support::eventually([&] { return live_guests().empty(); }, 60s, 50ms));
}

TEST_F(createos_ports, a_guest_createos_gives_no_url_is_a_typed_error) {
  // CreateOS sends the template only when it knows its public domain (SOURCES.md).
  createos->set_domain("");
  auto [id, guest] = session("no-domain");
  ASSERT_FALSE(guest.empty());
  auto r = call("POST", "/v1/sessions/" + id + "/ports/8080");
  EXPECT_EQ(r.status, 503u) << r.body;
  EXPECT_NE(r.body.find("\"unavailable\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("no public URL"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("http://"), std::string::npos) << r.body;
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200u);
}

TEST_F(createos_ports, a_reuse_flow_run_keeps_a_guest_created_with_ingress_and_its_url) {
  auto name = reuse_flow_guest("f-createos");
  ASSERT_FALSE(name.empty());
  ASSERT_TRUE(created_with_ingress(name, true)) << "no create for " << name;
  auto id = live_id(name);
  ASSERT_FALSE(id.empty()) << "no live guest " << name;
  auto r = call("POST", "/v1/components/" + name + "/ports/8000");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, R"({"url":")" + sdk_url(id, 8000) + R"(","expires_at":null})");
}

TEST_F(createos_ports, a_component_guest_gets_its_url_one_without_ingress_does_not) {
  auto with = guest_at_createos("gf-c-h40cstandin00000a", true);
  auto without = guest_at_createos("gf-c-h40cstandin00000b", false);
  auto r = call("POST", "/v1/components/gf-c-h40cstandin00000a/ports/9000");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(r.body, R"({"url":")" + sdk_url(with, 9000) + R"(","expires_at":null})");
  auto none = call("POST", "/v1/components/gf-c-h40cstandin00000b/ports/9000");
  EXPECT_EQ(none.status, 503u) << none.body;
  EXPECT_NE(none.body.find(without), std::string::npos) << none.body;
  EXPECT_EQ(call("POST", "/v1/components/gf-c-h40cstandin00000c/ports/9000").status, 404u);
}

/// serve as it starts on CreateOS by default: public ingress off.
class createos_ports_default : public createos_ports {
protected:
  std::string public_ingress() const override { return ""; }

  /// The refusal both ports routes give then: 503 unavailable naming the setting.
  static void expect_ingress_off(const http_reply& r) {
    EXPECT_EQ(r.status, 503u) << r.body;
    EXPECT_NE(r.body.find("\"unavailable\""), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("public ingress is off"), std::string::npos) << r.body;
    EXPECT_NE(r.body.find("GUESTFLOW_CREATEOS_PUBLIC_INGRESS=true"), std::string::npos)
        << r.body;
    EXPECT_EQ(r.body.find("http://"), std::string::npos) << r.body;
  }
};

TEST_F(createos_ports_default, a_session_guest_has_no_ingress_and_its_port_route_says_so) {
  auto [id, guest] = session("closed");
  ASSERT_FALSE(guest.empty());
  auto sent = creates();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].find("\"ingress_enabled\":false"), std::string::npos) << sent[0];
  // CreateOS itself says the guest has none.
  auto port = static_cast<uint16_t>(std::stoi(createos->url().substr(17)));
  auto view = http_client{port}.call("GET", "/v1/sandboxes/" + guest);
  EXPECT_NE(view.body.find("\"ingress_enabled\":false"), std::string::npos) << view.body;

  // Refused before CreateOS is asked anything about the guest, a ttl or not.
  auto before = createos->requests().size();
  expect_ingress_off(call("POST", "/v1/sessions/" + id + "/ports/8080"));
  expect_ingress_off(
      call("POST", "/v1/sessions/" + id + "/ports/8080", R"({"ttl_seconds":60})"));
  EXPECT_EQ(views_of(guest, before), 0u);
  EXPECT_EQ(call("DELETE", "/v1/sessions/" + id).status, 200u);
  EXPECT_TRUE(test_support::eventually([&] { return live_guests().empty(); }, 60s, 50ms));
}

TEST_F(createos_ports_default, a_reuse_flow_guest_has_no_ingress_and_its_port_route_says_so) {
  auto name = reuse_flow_guest("f-closed");
  ASSERT_FALSE(name.empty());
  auto id = live_id(name);
  ASSERT_FALSE(id.empty()) << "no live guest " << name;
  EXPECT_TRUE(created_with_ingress(name, false)) << "no create for " << name;

  auto before = createos->requests().size();
  expect_ingress_off(call("POST", "/v1/components/" + name + "/ports/8000"));
  EXPECT_EQ(views_of(id, before), 0u);
  // Even a guest CreateOS made with ingress (by someone else) gets no URL from this serve.
  guest_at_createos("gf-c-h40c2standin0000a", true);
  expect_ingress_off(call("POST", "/v1/components/gf-c-h40c2standin0000a/ports/8000"));
}

TEST_F(createos_ports_default, a_malformed_setting_refuses_to_start) {
  auto e = createos_env();
  e["GUESTFLOW_CREATEOS_PUBLIC_INGRESS"] = "publicly";
  auto r = control_plane_process::run_to_exit({"serve", "--listen", "127.0.0.1:0"}, env(e));
  EXPECT_EQ(r.status, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("GUESTFLOW_CREATEOS_PUBLIC_INGRESS: expected true or false, "
                               "got 'publicly'"),
            std::string::npos)
      << r.stderr_text;
  // Nothing was created at CreateOS.
  EXPECT_EQ(creates().size(), 0u);
}

} // namespace
} // namespace guestflow::testing
