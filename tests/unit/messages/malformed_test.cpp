// One ctest entry per malformed input: the exact error code and the field path that the
// message must start with ("<path>: <what>").

#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>
#include <string>

namespace guestflow {
namespace {

using namespace std::string_literals;

struct bad_input {
  std::string name;    ///< test name
  std::string decoder; ///< key in test::decoders()
  std::string input;
  std::string path;     ///< the message starts with "<path>: "
  std::string fragment; ///< and contains this
  size_t max_bytes = decode_limits{}.max_bytes;
};

std::string nested(const std::string& open, const std::string& close, size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i)
    s += open;
  s += "1";
  for (size_t i = 0; i < depth; ++i)
    s += close;
  return s;
}

/// `"k0":0,"k1":0,…` (`n` members, no duplicate).
std::string many_keys(size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  return s;
}

std::string node(const std::string& id, const std::string& type = "T") {
  return R"({"id":")" + id + R"(","data":{"type":")" + type + R"("}})";
}

std::string edge(const std::string& s, const std::string& t) {
  return R"({"source":")" + s + R"(","target":")" + t + R"("})";
}

std::string graph(const std::vector<std::string>& nodes,
                  const std::vector<std::string>& edges) {
  std::string out = R"({"nodes":[)";
  for (size_t i = 0; i < nodes.size(); ++i)
    out += (i ? "," : "") + nodes[i];
  out += R"(],"edges":[)";
  for (size_t i = 0; i < edges.size(); ++i)
    out += (i ? "," : "") + edges[i];
  return out + "]}";
}

const std::string hostname_refusal = "CreateOS does not enforce hostname egress rules";

std::vector<bad_input> table() {
  return {
      // -- syntax, limits, encoding --------------------------------------------------------
      {"TruncatedObject", "create", R"({"shape":"s1")", "document", "invalid JSON"},
      {"TruncatedString", "create", R"({"shape":"s1)", "document", "invalid JSON"},
      {"TruncatedArray", "exec_request", R"({"cmd":"a","args":["x",)", "document",
       "invalid JSON"},
      {"EmptyDocument", "create", "", "document", "invalid JSON"},
      {"OnlyWhitespace", "run_event", " \n\t ", "document", "invalid JSON"},
      {"TrailingGarbage", "create", R"({"shape":"a"} x)", "document", "unexpected data"},
      {"TwoDocuments", "exec_request", R"({"cmd":"a"}{"cmd":"b"})", "document",
       "unexpected data"},
      {"NulAfterValue", "raw_json", "{}\0{}"s, "document", "unexpected data"},
      {"RawNulInString", "exec_request", "{\"cmd\":\"a\0b\"}"s, "document", "invalid JSON"},
      {"LeadingZeroNumber", "exec_result", R"({"result":{"exit_code":01}})", "document",
       "invalid JSON"},
      {"SingleQuotes", "raw_json", "{'a':1}", "document", "invalid JSON"},
      {"DeepArrays129", "raw_json", nested("[", "]", 129), "document",
       "nesting deeper than 128"},
      {"DeepObjects200", "graph", nested(R"({"a":)", "}", 200), "document", "nesting deeper"},
      {"DeepInsideGraph", "graph",
       R"({"nodes":[{"id":"a","data":{"type":"T","x":)" + nested("[", "]", 140) +
           "}}],\"edges\":[]}",
       "document", "nesting deeper"},
      {"OversizeDocument", "raw_json", R"({"a":"0123456789abcdef"})", "document",
       "exceeds the limit of 16 bytes", 16},
      {"OversizeCreate", "create", R"({"shape":")" + std::string(100, 'x') + R"("})",
       "document", "exceeds the limit", 64},
      {"InvalidUtf8Byte", "create", "{\"shape\":\"\xff\"}", "document", "invalid UTF-8"},
      {"OverlongUtf8", "exec_request", "{\"cmd\":\"\xc0\xaf\"}", "document", "invalid UTF-8"},
      {"Utf8Surrogate", "exec_request", "{\"cmd\":\"\xed\xa0\x80\"}", "document",
       "invalid UTF-8"},
      {"EscapedLoneLowSurrogate", "create", R"({"shape":"\udc00"})", "document",
       "invalid UTF-8"},
      {"EscapedLoneHighSurrogate", "create", R"({"shape":"\ud800x"})", "document", "surrogate"},
      {"DuplicateKey", "exec_request", R"({"cmd":"ls","cmd":"rm"})", "document",
       R"(duplicate key "cmd")"},
      {"NestedDuplicateKey", "graph", R"({"nodes":[{"id":"a","id":"b"}],"edges":[]})",
       "nodes[0]", "duplicate key"},
      {"DuplicateKeyInTheSecondNode", "graph",
       R"({"nodes":[{"id":"a","data":{"type":"T"}},{"id":"b","data":{"x":1,"x":2}}],)"
       R"("edges":[]})",
       "nodes[1].data", R"(duplicate key "x")"},
      {"DuplicateKeySpelledWithAnEscape", "exec_request", R"({"cmd":"ls","cmd":"rm"})",
       "document", R"(duplicate key "cmd")"},
      {"DuplicateEmptyKey", "exec_request", R"({"":1,"cmd":"ls","":2})", "document",
       R"(duplicate key "")"},
      {"DuplicateKeyAmongForty", "graph",
       R"({"nodes":[{"id":"a","data":{)" + many_keys(40) + R"(,"k17":0}}],"edges":[]})",
       "nodes[0].data", R"(duplicate key "k17")"},
      {"RootIsArray", "exec_request", "[]", "document", "expected object, got array"},
      {"RootIsString", "view", R"("sb-1")", "document", "expected object"},
      // -- sandbox_create_request ------------------------------------------------------------
      {"CreateMissingShape", "create", "{}", "shape", "required"},
      {"CreateNullShape", "create", R"({"shape":null})", "shape", "required"},
      {"CreateShapeNumber", "create", R"({"shape":5})", "shape", "expected string, got number"},
      {"CreateShapeEmpty", "create", R"({"shape":""})", "shape", "must not be empty"},
      {"CreateShapeNul", "create", R"({"shape":"a\u0000b"})", "shape", "NUL"},
      {"CreateRootfsNul", "create", R"({"shape":"s","rootfs":"a\u0000"})", "rootfs", "NUL"},
      {"NameTooLong", "create", R"({"shape":"s","name":"abcdefghijklmnopqrstuvw"})", "name",
       "1-22 characters"},
      {"NameEmpty", "create", R"({"shape":"s","name":""})", "name", "1-22 characters"},
      {"NameUppercase", "create", R"({"shape":"s","name":"Bad-Name"})", "name", "[a-z0-9-]"},
      {"NameUnderscore", "create", R"({"shape":"s","name":"a_b"})", "name", "[a-z0-9-]"},
      {"NameNul", "create", R"({"shape":"s","name":"ab\u0000"})", "name", "NUL"},
      {"NameNumber", "create", R"({"shape":"s","name":7})", "name", "expected string"},
      {"AutoPauseTooLow", "create", R"({"shape":"s","auto_pause_after_seconds":59})",
       "auto_pause_after_seconds", "out of range (expected 60..86400)"},
      {"AutoPauseTooHigh", "create", R"({"shape":"s","auto_pause_after_seconds":86401})",
       "auto_pause_after_seconds", "out of range"},
      {"AutoPauseNegative", "create", R"({"shape":"s","auto_pause_after_seconds":-1})",
       "auto_pause_after_seconds", "out of range"},
      {"AutoPauseHuge", "create", R"({"shape":"s","auto_pause_after_seconds":1e400})",
       "auto_pause_after_seconds", "out of range"},
      {"AutoPauseBeyondUint64", "create",
       R"({"shape":"s","auto_pause_after_seconds":123456789012345678901234567890})",
       "auto_pause_after_seconds", "out of range"},
      {"AutoPauseFraction", "create", R"({"shape":"s","auto_pause_after_seconds":60.5})",
       "auto_pause_after_seconds", "expected integer"},
      {"AutoPauseString", "create", R"({"shape":"s","auto_pause_after_seconds":"600"})",
       "auto_pause_after_seconds", "expected integer, got string"},
      {"IngressNotBool", "create", R"({"shape":"s","ingress_enabled":"yes"})",
       "ingress_enabled", "expected boolean"},
      {"EgressHostname", "create", R"({"shape":"s","egress":["pypi.org"]})", "egress[0]",
       hostname_refusal},
      {"EgressWildcardHostname", "create", R"({"shape":"s","egress":["*.pypi.org"]})",
       "egress[0]", hostname_refusal},
      {"EgressHostnameWithPort", "create",
       R"({"shape":"s","egress":["1.2.3.4","pypi.org:443"]})", "egress[1]", hostname_refusal},
      {"EgressLocalhost", "egress_body", R"({"egress":["localhost"]})", "egress[0]",
       hostname_refusal},
      {"EgressHostBits", "create", R"({"shape":"s","egress":["10.0.0.1/8"]})", "egress[0]",
       "host bits set beyond /8; the network is 10.0.0.0/8"},
      {"EgressV6HostBits", "create", R"({"shape":"s","egress":["2001:db8::1/32"]})",
       "egress[0]", "host bits"},
      {"EgressStarMixed", "create", R"({"shape":"s","egress":["*","1.2.3.4"]})", "egress",
       "cannot be combined"},
      {"EgressPrefixTooLong", "create", R"({"shape":"s","egress":["10.0.0.0/33"]})",
       "egress[0]", "prefix length"},
      {"EgressPortZero", "create", R"({"shape":"s","egress":["1.2.3.4:0"]})", "egress[0]",
       "port"},
      {"EgressPortTooLarge", "create", R"({"shape":"s","egress":["1.2.3.4:65536"]})",
       "egress[0]", "port"},
      {"EgressBracketedV4", "create", R"({"shape":"s","egress":["[1.2.3.4]:80"]})", "egress[0]",
       "only for IPv6"},
      {"EgressGarbage", "create", R"({"shape":"s","egress":["1.2.3"]})", "egress[0]",
       "not an IPv4/IPv6 address"},
      {"EgressEmptyRule", "create", R"({"shape":"s","egress":[""]})", "egress[0]", "empty"},
      {"EgressNotArray", "create", R"({"shape":"s","egress":"*"})", "egress",
       "expected array, got string"},
      {"EgressElementNumber", "create", R"({"shape":"s","egress":[5]})", "egress[0]",
       "expected string"},
      {"EgressZoneId", "egress_body", R"({"egress":["fe80::1%eth0"]})", "egress[0]", "zone"},
      {"EnvKeyWithEquals", "create", R"({"shape":"s","envs":{"A=B":"x"}})", R"(envs["A=B"])",
       "'='"},
      {"EnvKeyEmpty", "create", R"({"shape":"s","envs":{"":"x"}})", R"(envs[""])",
       "must not be empty"},
      {"EnvKeyNul", "create", R"({"shape":"s","envs":{"A\u0000":"x"}})", R"(envs["A\u0000"])",
       "NUL"},
      {"EnvValueNumber", "create", R"({"shape":"s","envs":{"A":1}})", "envs.A",
       "expected string"},
      {"EnvValueNul", "create", R"({"shape":"s","envs":{"A":"x\u0000y"}})", "envs.A", "NUL"},
      {"EnvsNotObject", "create", R"({"shape":"s","envs":["A"]})", "envs", "expected object"},
      // -- exec ------------------------------------------------------------------------------
      {"ExecEmptyCmd", "exec_request", R"({"cmd":""})", "cmd", "must not be empty"},
      {"ExecMissingCmd", "exec_request", R"({"args":["x"]})", "cmd", "required"},
      {"ExecCmdNul", "exec_request", R"({"cmd":"ls\u0000rm"})", "cmd", "NUL"},
      {"ExecArgsNotArray", "exec_request", R"({"cmd":"ls","args":"-l"})", "args",
       "expected array"},
      {"ExecArgNumber", "exec_request", R"({"cmd":"ls","args":[1]})", "args[0]",
       "expected string"},
      {"ExecArgNul", "exec_request", R"({"cmd":"ls","args":["-l","a\u0000b"]})", "args[1]",
       "NUL"},
      {"ExecResultMissing", "exec_result", R"({"exec_ms":1})", "result", "required"},
      {"ExecExitCodeBeyondInt32", "exec_result", R"({"result":{"exit_code":4294967296}})",
       "result.exit_code", "out of range"},
      {"ExecExitCodeString", "exec_result", R"({"result":{"exit_code":"0"}})",
       "result.exit_code", "expected integer"},
      {"ExecMsNegative", "exec_result", R"({"result":{"exit_code":0},"exec_ms":-5})", "exec_ms",
       "out of range"},
      {"ExecErrorNumber", "exec_result", R"({"result":{"exit_code":0,"error":1}})",
       "result.error", "expected string"},
      {"StreamLineNoKey", "stream_line", R"({"x":1})", "document", "exactly one of"},
      {"StreamLineTwoKeys", "stream_line", R"({"stdout":"a","stderr":"b"})", "document",
       "exactly one of"},
      {"StreamLineHbFalse", "stream_line", R"({"hb":false})", "hb", "expected true"},
      {"StreamLineExitString", "stream_line", R"({"exit_code":"1"})", "exit_code",
       "expected integer"},
      {"StreamLineStdoutNull", "stream_line", R"({"stdout":null})", "stdout",
       "expected string"},
      // -- listings and views ----------------------------------------------------------------
      {"ShapesDataNotArray", "shape_list", R"({"data":{}})", "data", "expected array"},
      {"ShapesVcpuBeyondUint32", "shape_list",
       R"({"data":[{"id":"s","vcpu":4294967296}],"pagination":{"total":1}})", "data[0].vcpu",
       "out of range (expected an integer in 0..4294967295)"},
      {"ShapesMemNegative", "shape_list", R"({"data":[{"id":"a"},{"id":"b","mem_mib":-1}]})",
       "data[1].mem_mib", "out of range"},
      {"ShapesTotalString", "shape_list", R"({"data":[],"pagination":{"total":"3"}})",
       "pagination.total", "expected integer"},
      {"ViewUnknownStatus", "view", R"({"id":"sb","status":"zombie"})", "status",
       R"(unknown status "zombie")"},
      {"ViewEnvsNotStrings", "view", R"({"id":"sb","status":"running","envs":["A",2]})",
       "envs[1]", "expected string"},
      {"ViewPausedAtNumber", "view", R"({"id":"sb","status":"paused","paused_at":12})",
       "paused_at", "expected string"},
      {"ListItemMissingId", "list", R"({"data":[{"status":"running"}]})", "data[0].id",
       "required"},
      {"ListItemBadEgress", "list",
       R"({"data":[{"id":"a","status":"running"},{"id":"b","status":"running","egress":["x.io"]}]})",
       "data[1].egress[0]", hostname_refusal},
      {"CreatedSpawnMsFraction", "created", R"({"id":"sb","spawn_ms":1.5})", "spawn_ms",
       "expected integer"},
      {"DeletedStatusNumber", "deleted", R"({"id":"sb","status":3})", "status",
       "expected string"},
      {"WhoamiStatsWrongType", "whoami", R"({"user_id":"u","stats":{"running":"1"}})",
       "stats.running", "expected integer"},
      {"CapabilitiesTimeoutHuge", "capabilities", R"({"max_timeout_seconds":1e10})",
       "max_timeout_seconds", "out of range"},
      {"CapabilitiesFlagString", "capabilities", R"({"link_local_blocked":"true"})",
       "link_local_blocked", "expected boolean"},
      // -- graphs ----------------------------------------------------------------------------
      {"GraphMissingNodes", "graph", R"({"edges":[]})", "nodes", "required"},
      {"GraphMissingEdges", "graph", R"({"nodes":[]})", "edges", "required"},
      {"GraphNodesNotArray", "graph", R"({"nodes":{},"edges":[]})", "nodes", "expected array"},
      {"GraphNodeTypeNotString", "graph",
       graph({node("a"), node("b"), node("c"), R"({"id":"d","data":{"type":5}})"}, {}),
       "nodes[3].data.type", "expected string"},
      {"GraphNodeMissingData", "graph", graph({R"({"id":"a"})"}, {}), "nodes[0].data",
       "required"},
      {"GraphNodeIdNumber", "graph", graph({R"({"id":1,"data":{"type":"T"}})"}, {}),
       "nodes[0].id", "expected string"},
      {"GraphNodeIdEmpty", "graph", graph({node("")}, {}), "nodes[0].id", "must not be empty"},
      {"GraphNodeIdNul", "graph", graph({node(R"(a\u0000)")}, {}), "nodes[0].id", "NUL"},
      {"GraphDuplicateIds", "graph", graph({node("a"), node("b"), node("a")}, {}),
       "nodes[2].id", R"(duplicate node id "a" (first at nodes[0]))"},
      {"GraphDanglingTarget", "graph",
       graph({node("a"), node("b")}, {edge("a", "b"), edge("a", "zz")}), "edges[1].target",
       R"(unknown node "zz")"},
      {"GraphDanglingSource", "graph", graph({node("a")}, {edge("ghost", "a")}),
       "edges[0].source", R"(unknown node "ghost")"},
      {"GraphSelfEdge", "graph", graph({node("a")}, {edge("a", "a")}), "edges[0]",
       R"(self-edge on node "a")"},
      {"GraphTwoCycle", "graph",
       graph({node("a"), node("b")}, {edge("a", "b"), edge("b", "a")}), "edges",
       "cycle: a -> b -> a"},
      {"GraphThreeCycleAfterAChain", "graph",
       graph({node("x"), node("c"), node("a"), node("b")},
             {edge("x", "a"), edge("a", "b"), edge("b", "c"), edge("c", "a")}),
       "edges", "cycle: c -> a -> b -> c"},
      {"GraphWrappedPath", "graph",
       R"({"data":{"nodes":[{"id":"a","data":{"type":[]}}],"edges":[]}})",
       "data.nodes[0].data.type", "expected string, got array"},
      {"GraphWrappedDuplicate", "graph",
       R"({"data":)" + graph({node("a"), node("a")}, {}) + "}", "data.nodes[1].id",
       "duplicate node id"},
      {"GraphTemplateNotObject", "graph",
       graph({R"({"id":"a","data":{"type":"T","node":{"template":[]}}})"}, {}),
       "nodes[0].data.node.template", "expected object"},
      {"GraphOutputsNotArray", "graph",
       graph({R"({"id":"a","data":{"type":"T","node":{"outputs":{}}}})"}, {}),
       "nodes[0].data.node.outputs", "expected array"},
      {"GraphDisplayNameNumber", "graph",
       graph({R"({"id":"a","data":{"type":"T","node":{"display_name":1}}})"}, {}),
       "nodes[0].data.node.display_name", "expected string"},
      {"GraphTemplateValueHuge", "graph",
       graph(
           {R"({"id":"a","data":{"type":"T","node":{"template":{"x":{"value":[1,-1e999]}}}}})"},
           {}),
       "nodes[0].data.node.template.x.value[1]", "number out of range"},
      {"GraphHandleNumber", "graph",
       graph({node("a"), node("b")},
             {R"({"source":"a","target":"b","data":{"sourceHandle":3}})"}),
       "edges[0].data.sourceHandle", "expected object"},
      {"GraphHandleNameNumber", "graph",
       graph({node("a"), node("b")},
             {R"({"source":"a","target":"b","data":{"targetHandle":{"fieldName":3}}})"}),
       "edges[0].data.targetHandle.fieldName", "expected string"},
      {"GraphEdgeMissingTarget", "graph", graph({node("a")}, {R"({"source":"a"})"}),
       "edges[0].target", "required"},
      // -- guest frames (only known frames with bad fields are errors) ----------------------
      {"FrameTooLarge", "frame", R"({"t":"done","pad":"0123456789"})", "document",
       "frame too large", 16},
      {"FrameStepMissingEvent", "frame", R"({"t":"step"})", "event", "required"},
      {"FrameStepIdNumber", "frame", R"({"t":"step","event":{"type":"vertex","id":1}})",
       "event.id", "expected string"},
      {"FrameStepValidString", "frame",
       R"({"t":"step","event":{"type":"vertex","id":"a","valid":"yes"}})", "event.valid",
       "expected boolean"},
      {"FrameStepDurationNegative", "frame",
       R"({"t":"step","event":{"type":"vertex","id":"a","duration_ms":-3}})",
       "event.duration_ms", "out of range"},
      {"FrameStepLogsObject", "frame",
       R"({"t":"step","event":{"type":"vertex","id":"a","logs":{}}})", "event.logs",
       "expected string"},
      {"FrameVertexStartMissingId", "frame", R"({"t":"vertex_start","name":"x"})", "id",
       "required"},
      {"FrameOutputsNotArray", "frame", R"({"t":"outputs","run_outputs":{}})", "run_outputs",
       "expected array"},
      {"FrameOutputsInputsNotObject", "frame",
       R"({"t":"outputs","run_outputs":[{"inputs":[]}]})", "run_outputs[0].inputs",
       "expected object"},
      {"FrameOutputsResultDataField", "frame",
       R"({"t":"outputs","run_outputs":[{"outputs":[null,{"component_id":7}]}]})",
       "run_outputs[0].outputs[1].component_id", "expected string"},
      {"FrameOutputsTimedeltaHuge", "frame",
       R"({"t":"outputs","run_outputs":[{"outputs":[{"timedelta":1e400}]}]})",
       "run_outputs[0].outputs[0].timedelta", "number out of range"},
      {"FrameFatalErrorNumber", "frame", R"({"t":"fatal","error":1})", "error",
       "expected string"},
      // -- run events, jsend, sandbox results ------------------------------------------------
      {"EventUnknownType", "run_event", R"({"run_id":"r","seq":0,"type":"exploded"})", "type",
       R"(unknown event type "exploded")"},
      {"EventSeqNegative", "run_event", R"({"run_id":"r","seq":-1,"type":"stdout","line":""})",
       "seq", "out of range"},
      {"EventMissingRunId", "run_event", R"({"seq":0,"type":"stdout","line":""})", "run_id",
       "required"},
      {"EventUnknownErrorCode", "run_event",
       R"({"run_id":"r","seq":1,"type":"error","code":"meltdown","message":"x"})", "code",
       R"(unknown error code "meltdown")"},
      {"EventCompleteWithoutOutputs", "run_event",
       R"({"run_id":"r","seq":1,"type":"complete"})", "outputs", "required"},
      {"EventBuiltDurationFraction", "run_event",
       R"({"run_id":"r","seq":1,"type":"vertex_built","id":"a","duration_ms":0.5})",
       "duration_ms", "expected integer"},
      {"JsendUnknownStatus", "jsend", R"({"status":"ok","data":{}})", "status",
       R"(expected "success", "fail" or "error")"},
      {"JsendMissingStatus", "jsend", R"({"data":{}})", "status", "required"},
      {"JsendErrorWithoutMessage", "jsend", R"({"status":"error","code":500})", "message",
       "required"},
      {"JsendErrorCodeString", "jsend", R"({"status":"error","message":"m","code":"500"})",
       "code", "expected integer"},
      {"JsendDataHugeNumber", "jsend", R"({"status":"success","data":{"n":[1e400]}})",
       "data.n[0]", "number out of range"},
      {"SandboxResultMissingExit", "sandbox_result", R"({"stdout":"x"})", "exit_code",
       "required"},
      {"SandboxResultTimeHuge", "sandbox_result",
       R"({"exit_code":0,"execution_time_ms":1e400})", "execution_time_ms", "out of range"},
      {"SandboxResultStdoutNumber", "sandbox_result", R"({"stdout":1,"exit_code":0})", "stdout",
       "expected string"},
      {"RunOutputsBodyNotArray", "run_outputs", R"({"outputs":{}})", "outputs",
       "expected array"},
      {"RunOutputsBodyNestedLogs", "run_outputs",
       R"({"outputs":[{"outputs":[{"used_frozen_result":1}]}]})",
       "outputs[0].outputs[0].used_frozen_result", "expected boolean"},
  };
}

class malformed : public ::testing::TestWithParam<bad_input> {};

TEST_P(malformed, is_bad_request_naming_the_field) {
  auto& row = GetParam();
  auto& decoders = test::decoders();
  auto dec = decoders.find(row.decoder);
  ASSERT_NE(dec, decoders.end()) << row.decoder;
  decode_limits limits;
  limits.max_bytes = row.max_bytes;
  auto err = dec->second(row.input, limits);
  ASSERT_TRUE(err.has_value()) << "accepted: " << row.input;
  EXPECT_EQ(err->code, ec::bad_request) << to_string(err->code);
  EXPECT_EQ(err->message.rfind(row.path + ": ", 0), 0u)
      << "message does not start with \"" << row.path << ": \": " << err->message;
  EXPECT_NE(err->message.find(row.fragment), std::string::npos)
      << "missing \"" << row.fragment << "\" in: " << err->message;
}

INSTANTIATE_TEST_SUITE_P(table, malformed, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<bad_input>& info) {
                           return info.param.name;
                         });

TEST(malformed_table, has_at_least_forty_rows_with_unique_names) {
  auto rows = table();
  EXPECT_GE(rows.size(), 40u);
  std::set<std::string> names;
  for (auto& r : rows)
    EXPECT_TRUE(names.insert(r.name).second) << r.name;
}

} // namespace
} // namespace guestflow
