// Every kind of bad input gets a JSend fail/error with a message that says what to
// change, and leaves no guest (record or workspace) behind.
#include "tests/integration/control_plane/fixture.hpp"

namespace guestflow::testing {
namespace {

class control_plane_bad_input : public control_plane_test {
protected:
  void SetUp() override {
    control_plane_test::SetUp();
    total_ = sandbox_total();
    workspaces_ = workspace_count();
  }
  /// POST /v1/sandboxes with `body` is refused with `status` mentioning `needle`, and
  /// nothing was created.
  void refuse_create(const std::string& body, unsigned status, const std::string& needle) {
    expect_refusal(call("POST", "/v1/sandboxes", body), status, needle);
    expect_nothing_created();
  }
  void expect_nothing_created() {
    EXPECT_EQ(sandbox_total(), total_) << "a refused request left a record";
    EXPECT_EQ(workspace_count(), workspaces_) << "a refused request left a workspace";
  }
  /// Like expect_nothing_created, for a test that created `n` guests on purpose.
  void expect_nothing_created_but(size_t n) {
    EXPECT_EQ(sandbox_total(), total_ + n);
    EXPECT_EQ(workspace_count(), workspaces_ + n);
  }
  uint64_t total_ = 0;
  size_t workspaces_ = 0;
};

TEST_F(control_plane_bad_input, malformed_json) {
  refuse_create(R"({"shape":)", 400, "");
  refuse_create("not json at all", 400, "");
  refuse_create("", 400, "");
}

TEST_F(control_plane_bad_input, known_fields_of_the_wrong_type) {
  refuse_create(R"({"shape":5})", 400, "shape");
  refuse_create(R"({"shape":"s-1vcpu-256mb","name":7})", 400, "name");
  refuse_create(R"({"shape":"s-1vcpu-256mb","envs":["A=1"]})", 400, "envs");
  refuse_create(R"({"shape":"s-1vcpu-256mb","auto_pause_after_seconds":"60"})", 400,
                "auto_pause_after_seconds");
  refuse_create(R"({"shape":"s-1vcpu-256mb","egress":"*"})", 400, "egress");
  refuse_create(R"({"rootfs":"debian:12"})", 400, "shape");
}

TEST_F(control_plane_bad_input, unknown_shape_or_rootfs) {
  refuse_create(R"({"shape":"s-64vcpu-1tb"})", 400, "s-1vcpu-256mb");
  refuse_create(R"({"shape":"s-1vcpu-256mb","rootfs":"ubuntu:24.04"})", 400, "debian:12");
}

TEST_F(control_plane_bad_input, bad_names) {
  refuse_create(R"({"shape":"s-1vcpu-256mb","name":"a-name-that-is-far-too-long"})", 400,
                "name");
  refuse_create(R"({"shape":"s-1vcpu-256mb","name":"Upper_Case"})", 400, "name");
  refuse_create(R"({"shape":"s-1vcpu-256mb","name":"sp ace"})", 400, "name");
}

TEST_F(control_plane_bad_input, duplicate_live_name_conflicts) {
  auto first = create(R"({"shape":"s-1vcpu-256mb","name":"twin"})");
  total_ = sandbox_total();
  workspaces_ = workspace_count();
  refuse_create(R"({"shape":"s-1vcpu-256mb","name":"twin"})", 409, "twin");
  EXPECT_EQ(view(first.id).status, sandbox_status::running);
}

TEST_F(control_plane_bad_input, auto_pause_out_of_range) {
  refuse_create(R"({"shape":"s-1vcpu-256mb","auto_pause_after_seconds":59})", 400,
                "auto_pause_after_seconds");
  refuse_create(R"({"shape":"s-1vcpu-256mb","auto_pause_after_seconds":86401})", 400,
                "auto_pause_after_seconds");
}

TEST_F(control_plane_bad_input, hostname_egress_rules) {
  refuse_create(R"({"shape":"s-1vcpu-256mb","egress":["pypi.org"]})", 400, "egress");
  refuse_create(R"({"shape":"s-1vcpu-256mb","egress":["pypi.org:443"]})", 400, "egress");
  refuse_create(R"({"shape":"s-1vcpu-256mb","egress":["*","10.0.0.0/8"]})", 400, "egress");
}

TEST_F(control_plane_bad_input, huge_bodies_get_413) {
  stop();
  start({"--max-file-bytes", "1048576"});
  std::string big(2 << 20, ' ');
  auto r = call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb","name":"x")" + big + "}");
  expect_refusal(r, 413, "limit");
  expect_refusal(call("POST", "/v1/sandboxes", big, {{"Transfer-Encoding", "chunked"}}), 413,
                 "limit");
  expect_nothing_created();
  auto g = create();
  std::string file(2 << 20, 'f');
  expect_refusal(put_file(g.id, "/workspace/big", file), 413, "limit");
  expect_refusal(call("PUT", "/v1/sandboxes/" + g.id + "/files?path=/workspace/big", file,
                      {{"Transfer-Encoding", "chunked"}}),
                 413, "limit");
  auto back = get_file(g.id, "/workspace/big");
  EXPECT_TRUE(back.status == 404 || back.body.empty()) << "no partial file may remain";
  // Exactly at the limit is fine.
  EXPECT_EQ(put_file(g.id, "/workspace/ok", std::string(1 << 20, 'o')).status, 200u);
  EXPECT_EQ(get_file(g.id, "/workspace/ok").body.size(), 1u << 20);
}

TEST_F(control_plane_bad_input, traversal_and_bad_paths) {
  auto g = create(R"({"shape":"s-1vcpu-256mb","envs":{"PATH":"/usr/bin:/bin"}})");
  // Symlinks that would leave the guest if resolved on the host side.
  ASSERT_EQ(exec(g.id, "/bin/sh",
                 {"-c", "ln -s / /workspace/root && "
                        "ln -s ../../../../../../../.. /workspace/up"})
                .exit_code,
            0);
  const std::string base = "/v1/sandboxes/" + g.id + "/files?path=";
  for (const std::string q : {"..%2F..%2Fetc%2Fpasswd", "%2Fworkspace%2F..%2F..%2Fetc%2Fshadow",
                              "relative%2Ffile", "%2Fworkspace%2Fa%00b"}) {
    expect_refusal(call("PUT", base + q, "x"), 400, "path");
    expect_refusal(call("GET", base + q), 400, "path");
  }
  // Through the links: never the host's files (the guest has no /etc/shadow; the host has).
  ASSERT_TRUE(std::filesystem::exists("/etc/shadow"));
  for (const std::string q :
       {"%2Fworkspace%2Froot%2Fetc%2Fshadow", "%2Fworkspace%2Fup%2Fetc%2Fshadow"}) {
    auto r = call("GET", base + q);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << q << ": " << r.status << " " << r.body;
    auto w = call("PUT", base + q, "owned");
    EXPECT_TRUE(w.status == 400 || w.status == 404) << q << ": " << w.status << " " << w.body;
  }
  expect_refusal(call("GET", "/v1/sandboxes/" + g.id + "/files"), 400, "path");
  expect_refusal(call("GET", base + "%zz"), 400, "percent");
  expect_nothing_created_but(1);
}

TEST_F(control_plane_bad_input, unknown_ids_are_404) {
  const std::string id = "sb-0000000000000000";
  expect_refusal(call("GET", "/v1/sandboxes/" + id), 404, id);
  expect_refusal(call("DELETE", "/v1/sandboxes/" + id), 404, id);
  expect_refusal(call("POST", "/v1/sandboxes/" + id + "/exec", R"({"cmd":"/bin/true"})"), 404,
                 id);
  expect_refusal(call("POST", "/v1/sandboxes/" + id + "/pause"), 404, id);
  expect_refusal(call("POST", "/v1/sandboxes/" + id + "/resume"), 404, id);
  expect_refusal(call("GET", "/v1/sandboxes/" + id + "/egress"), 404, id);
  expect_refusal(call("GET", "/v1/sandboxes/" + id + "/files?path=/workspace/x"), 404, id);
  expect_refusal(call("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/x", "x"), 404, id);
}

TEST_F(control_plane_bad_input, exec_with_an_empty_cmd) {
  auto g = create();
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/exec", R"({"cmd":""})"), 400, "cmd");
  expect_refusal(call("POST", "/v1/sandboxes/" + g.id + "/exec", R"({"args":["x"]})"), 400,
                 "cmd");
  expect_refusal(
      call("POST", "/v1/sandboxes/" + g.id + "/exec", R"({"cmd":"/bin/true","args":"x"})"), 400,
      "args");
  expect_refusal(
      call("POST", "/v1/sandboxes/" + g.id + "/exec?stream=maybe", R"({"cmd":"/bin/true"})"),
      400, "stream");
}

TEST_F(control_plane_bad_input, unknown_routes_and_methods) {
  expect_refusal(call("GET", "/v1/nothing-here"), 404, "/v1/nothing-here");
  expect_refusal(call("GET", "/v2/sandboxes"), 404, "/v2/sandboxes");
  auto r = call("DELETE", "/v1/shapes");
  expect_refusal(r, 405, "GET");
  EXPECT_EQ(r.headers["allow"], "GET");
  expect_refusal(call("PATCH", "/v1/sandboxes"), 405, "GET, POST");
}

} // namespace
} // namespace guestflow::testing
