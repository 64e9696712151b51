// What the decoders accept: lenient where the wire is (unknown fields, null for absent,
// integral doubles), and the values they produce.

#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

struct good_input {
  std::string name;
  std::string decoder;
  std::string input;
};

class accepted : public ::testing::TestWithParam<good_input> {};

TEST_P(accepted, decodes) {
  auto& row = GetParam();
  auto dec = test::decoders().find(row.decoder);
  ASSERT_NE(dec, test::decoders().end());
  auto err = dec->second(row.input, decode_limits{});
  EXPECT_FALSE(err.has_value()) << err->message;
}

INSTANTIATE_TEST_SUITE_P(
    table, accepted,
    ::testing::Values(
        good_input{"CreateMinimal", "create", R"({"shape":"s"})"},
        good_input{"CreateUnknownFieldsIgnored", "create",
                   R"({"shape":"s","future":{"x":[1,2,{"y":null}]},"gpu":true})"},
        good_input{"CreateNullOptionals", "create",
                   R"({"shape":"s","rootfs":null,"name":null,"egress":null,"envs":null,)"
                   R"("auto_pause_after_seconds":null,"ingress_enabled":null})"},
        good_input{"CreateBoundaryAutoPause", "create",
                   R"({"shape":"s","auto_pause_after_seconds":86400})"},
        good_input{"CreateIntegralDoubleAutoPause", "create",
                   R"({"shape":"s","auto_pause_after_seconds":6e1})"},
        good_input{"CreateName22", "create",
                   R"({"shape":"s","name":"abcdefghijklmnopqrstuv"})"},
        good_input{"CreateEnvValueWithEquals", "create",
                   R"({"shape":"s","envs":{"A":"b=c","EMPTY":""}})"},
        good_input{"ExecArgsAbsent", "exec_request", R"({"cmd":"true"})"},
        good_input{"ExecUnicodeArgs", "exec_request",
                   R"({"cmd":"echo","args":["é","😀","\ud83d\ude00"]})"},
        good_input{"ExecResultNegativeExit", "exec_result", R"({"result":{"exit_code":-1}})"},
        good_input{"StreamHeartbeat", "stream_line", R"({"hb":true})"},
        good_input{"StreamExitWithExtras", "stream_line", R"({"exit_code":0,"ts":123})"},
        good_input{"ViewWithoutOptionals", "view", R"({"id":"sb","status":"destroyed"})"},
        good_input{"ListWithoutPagination", "list", R"({"data":[]})"},
        good_input{"WhoamiWithoutStats", "whoami", R"({"user_id":"u"})"},
        good_input{"CapabilitiesEmpty", "capabilities", "{}"},
        good_input{"RawUnderflowIsZero", "raw_json", "[1e-400,-1e-400]"},
        good_input{"RawDepth128", "raw_json", std::string(128, '[') + std::string(128, ']')},
        good_input{"RawWhitespaceAround", "raw_json", " \r\n\t{}\n"},
        good_input{"JsendSuccessWithoutData", "jsend", R"({"status":"success"})"},
        good_input{"GraphBare", "graph", R"({"nodes":[],"edges":[]})"},
        good_input{"GraphWrapped", "graph", R"({"data":{"nodes":[],"edges":[]},"name":"x"})"},
        good_input{"EventStdoutEmptyLine", "run_event",
                   R"({"run_id":"r","seq":0,"type":"stdout","line":""})"},
        good_input{"SandboxResultMinimal", "sandbox_result", R"({"exit_code":137})"},
        good_input{"RunOutputsNullInputs", "run_outputs",
                   R"({"outputs":[{"inputs":null,"outputs":[null]}]})"}),
    [](const ::testing::TestParamInfo<good_input>& info) { return info.param.name; });

TEST(accept, egress_wire_modes) {
  auto mode = [](std::string egress) {
    auto r = decode<egress_body>(R"({"egress":)" + egress + "}");
    EXPECT_TRUE(r) << egress << ": " << r.error().message;
    return r ? r->egress.mode : egress_policy::kind::rules;
  };
  using k = egress_policy::kind;
  EXPECT_EQ(mode("null"), k::allow_all);
  EXPECT_EQ(mode("[]"), k::allow_all);
  EXPECT_EQ(mode(R"(["*"])"), k::allow_all);
  EXPECT_EQ(mode(R"(["240.0.0.0/4"])"), k::deny_all);
  EXPECT_EQ(mode(R"(["10.0.0.0/8"])"), k::rules);
  auto absent = decode<egress_body>("{}");
  ASSERT_TRUE(absent);
  EXPECT_EQ(absent->egress, egress_policy::allow_all());
}

TEST(accept, create_request_values) {
  auto r = decode<sandbox_create_request>(
      R"({"shape":"s-1","rootfs":"devbox:1","name":"lf-1","egress":["1.2.3.4:443"],)"
      R"("envs":{"A":"1"},"auto_pause_after_seconds":600,"ingress_enabled":true})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->shape, "s-1");
  EXPECT_EQ(r->rootfs, std::string{"devbox:1"});
  EXPECT_EQ(r->name, std::string{"lf-1"});
  EXPECT_EQ(to_strings(r->egress), std::vector<std::string>{"1.2.3.4:443"});
  EXPECT_EQ(r->envs.at("A"), "1");
  EXPECT_EQ(r->auto_pause_after_seconds, uint32_t{600});
  EXPECT_TRUE(r->ingress_enabled);
}

TEST(accept, stream_line_kinds) {
  using k = exec_stream_line::kind;
  auto line = [](const char* text) { return *decode<exec_stream_line>(text); };
  EXPECT_EQ(line(R"({"stdout":"a"})").type, k::stdout_chunk);
  EXPECT_EQ(line(R"({"stdout":"a"})").text, "a");
  EXPECT_EQ(line(R"({"stderr":"b"})").type, k::stderr_chunk);
  EXPECT_EQ(line(R"({"error":"c"})").type, k::error);
  EXPECT_EQ(line(R"({"exit_code":-9})").exit_code, -9);
  EXPECT_EQ(line(R"({"hb":true})").type, k::heartbeat);
  // The exit line's exec_ms is optional: CreateOS and older control planes do not send it.
  EXPECT_EQ(line(R"({"exit_code":0})").exec_ms, std::nullopt);
  EXPECT_EQ(line(R"({"exit_code":0,"exec_ms":512})").exec_ms, 512u);
  EXPECT_EQ(encode(line(R"({"exit_code":3,"exec_ms":512})")),
            R"({"exit_code":3,"exec_ms":512})");
  EXPECT_FALSE(decode<exec_stream_line>(R"({"exit_code":0,"exec_ms":-1})"));
}

TEST(accept, list_totals_default_to_the_page_size) {
  auto r = decode<shape_list>(R"({"data":[{"id":"a"},{"id":"b","vcpu":2}]})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->total, 2u);
  EXPECT_EQ(r->data[1].vcpu, 2u);
  auto paged = decode<sandbox_list>(
      R"({"data":[{"id":"a","status":"running"}],"pagination":{"total":40,"limit":1}})");
  ASSERT_TRUE(paged) << paged.error().message;
  EXPECT_EQ(paged->total, 40u);
}

TEST(accept, extreme_integers_at_their_bounds) {
  auto r = decode<whoami>(R"({"user_id":"u","stats":{"running":18446744073709551615}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->running, UINT64_MAX);
  auto e = decode<exec_result>(R"({"result":{"exit_code":-2147483648},"exec_ms":0})");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->exit_code, INT32_MIN);
  auto j = decode<jsend>(R"({"status":"error","message":"m","code":-9223372036854775808})");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->code, INT64_MIN);
}

TEST(accept, default_limits_allow_large_documents) {
  // 8 MiB of stdout in one exec result is fine under the 64 MiB default.
  std::string big(8 << 20, 'x');
  auto r = decode<exec_result>(R"({"result":{"stdout":")" + big + R"(","exit_code":0}})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->stdout_text.size(), big.size());
}

} // namespace
} // namespace guestflow
