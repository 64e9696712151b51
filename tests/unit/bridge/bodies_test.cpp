// The bridge's request and answer bodies (messages/bridge.hpp), and the helpers they use.

#include "messages/base64.hpp"
#include "messages/bridge.hpp"
#include "messages/flow_run.hpp"
#include "messages/secret.hpp"

#include <gtest/gtest.h>

using namespace guestflow;

namespace {

constexpr const char* tiny_flow = R"({"data":{"nodes":[],"edges":[]}})";

} // namespace

TEST(base64, encodes_every_tail_length_as_rfc_4648) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string{"\0\xff\x10", 3}), "AP8Q");
}

TEST(same_secret, accepts_only_the_exact_secret) {
  EXPECT_TRUE(same_secret("token", "token"));
  EXPECT_FALSE(same_secret("tokeN", "token"));
  EXPECT_FALSE(same_secret("toke", "token"));
  EXPECT_FALSE(same_secret("tokens", "token"));
  EXPECT_FALSE(same_secret("", "token"));
}

TEST(sandbox_call, decodes_every_field_and_leaves_omitted_settings_to_the_node) {
  auto c = decode<sandbox_call>(
      R"j({"code":"print(1)","env":{"A":"b"},"timeout_seconds":5,"memory_mb":512,"allow_network":true,"allowed_domains":["x.org"]})j");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->code, "print(1)");
  EXPECT_EQ(c->env.at("A"), "b");
  EXPECT_EQ(c->timeout_seconds, 5u);
  EXPECT_EQ(c->memory_mb, 512u);
  EXPECT_EQ(c->allow_network, true);
  ASSERT_TRUE(c->allowed_domains);
  EXPECT_EQ(c->allowed_domains->at(0), "x.org");
  auto bare = decode<sandbox_call>(R"({"code":""})");
  ASSERT_TRUE(bare);
  EXPECT_FALSE(bare->timeout_seconds);
  EXPECT_FALSE(bare->memory_mb);
  EXPECT_FALSE(bare->allow_network);
  EXPECT_FALSE(bare->allowed_domains);
}

TEST(sandbox_call, refuses_bad_fields_by_name) {
  for (auto [body, field] :
       {std::pair{R"({})", "code"},
        {R"({"code":"x","timeout_seconds":0})", "timeout_seconds"},
        {R"({"code":"x","timeout_seconds":86401})", "timeout_seconds"},
        {R"({"code":"x","memory_mb":0})", "memory_mb"},
        {R"({"code":"x","env":{"":"v"}})", "env"},
        {R"({"code":"x","env":{"K":1}})", "env.K"},
        {R"({"code":"x","allow_network":"yes"})", "allow_network"},
        {R"({"code":"x","allowed_domains":"x.org"})", "allowed_domains"}}) {
    auto c = decode<sandbox_call>(body);
    ASSERT_FALSE(c) << body;
    EXPECT_EQ(c.error().code, ec::bad_request);
    EXPECT_NE(c.error().message.find(field), std::string::npos) << c.error().message;
  }
}

TEST(component_call, takes_a_program_or_a_command_but_not_both) {
  auto p = decode<component_call>(
      R"j({"flow_id":"f","component_id":"c","reuse":"flow","program":"print(1)","return_files":true})j");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->reuse);
  EXPECT_EQ(p->program, "print(1)");
  EXPECT_TRUE(p->return_files);
  auto c = decode<component_call>(
      R"({"flow_id":"f","component_id":"c","cmd":"sh","args":["-c","true"]})");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_FALSE(c->reuse);
  EXPECT_EQ(c->argv, (std::vector<std::string>{"sh", "-c", "true"}));
  for (auto body : {R"({"flow_id":"f","component_id":"c"})",
                    R"({"flow_id":"f","component_id":"c","program":"x","cmd":"sh"})",
                    R"({"flow_id":"f","component_id":"c","program":"x","args":["a"]})",
                    R"({"flow_id":"f","component_id":"c","cmd":""})",
                    R"({"flow_id":"","component_id":"c","cmd":"sh"})",
                    R"({"flow_id":"f","component_id":"c","cmd":"sh","reuse":"always"})"}) {
    auto bad = decode<component_call>(body);
    ASSERT_FALSE(bad) << body;
    EXPECT_EQ(bad.error().code, ec::bad_request);
  }
}

TEST(run_request, streams_by_default_and_reads_cancel_on_disconnect) {
  auto r = decode<run_request>(std::string{R"({"flow":)"} + tiny_flow + "}");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->stream);
  EXPECT_FALSE(r->cancel_on_disconnect);
  auto s = decode<run_request>(
      std::string{R"({"stream":false,"cancel_on_disconnect":true,"flow":)"} + tiny_flow + "}");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_FALSE(s->stream);
  EXPECT_TRUE(s->cancel_on_disconnect);
  auto again = decode<run_request>(encode(*s));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *s);
}

TEST(answers, are_the_shapes_api_md_names) {
  EXPECT_EQ(encode_error(failure{ec::capacity, "full"}),
            R"({"error":{"code":"capacity","message":"full"}})");
  EXPECT_EQ(encode_error(failure{ec::timeout, "slow"}, "run-1"),
            R"({"run_id":"run-1","error":{"code":"timeout","message":"slow"}})");
  EXPECT_EQ(encode_cancel_answer("run-1", true), R"({"run_id":"run-1","cancelled":true})");
  EXPECT_EQ(encode_run_answer("run-1", run_event{}),
            R"({"run_id":"run-1","outputs":[],"ok":true})");
  capabilities caps;
  caps.isolation = "namespaces";
  auto c = encode_capabilities(caps, "local");
  EXPECT_EQ(c.rfind(R"({"provider":"local","isolation":"namespaces",)", 0), 0u) << c;

  component_answer a;
  a.result = {"out\n", "", 0, 12};
  a.guest = "gf-c-abc";
  a.reusable = true;
  a.reused = true;
  a.files = returned_files{{{"a.txt", 3, "abc"}}, {{"link", "symbolic link"}}, std::nullopt};
  EXPECT_EQ(
      encode(a),
      R"({"stdout":"out\n","stderr":"","exit_code":0,"execution_time_ms":12,"outcome":"ok",)"
      R"("guest":"gf-c-abc","reusable":true,"reused":true,)"
      R"("files":[{"path":"a.txt","size":3,"content_base64":"YWJj"}],)"
      R"("dropped":[{"path":"link","reason":"symbolic link"}]})");
  a.outcome = ec::timeout;
  a.files = returned_files{{}, {}, failure{ec::artifact_too_large, "over 5 MiB"}};
  auto t = encode(a);
  EXPECT_NE(t.find(R"("outcome":"timeout")"), std::string::npos) << t;
  EXPECT_NE(t.find(R"("files_error":{"code":"artifact_too_large","message":"over 5 MiB"})"),
            std::string::npos)
      << t;
}
