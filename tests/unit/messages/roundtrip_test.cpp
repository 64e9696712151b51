// decode(encode(x)) == x for every wire type, and encoders are byte-stable.

#include "messages/json_codec.hpp"
#include "tests/unit/messages/samples.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

using namespace guestflow::test;

/// Round trip plus byte stability: encoding the decoded value reproduces the bytes.
template<class T>
void expect_round_trip(const T& x) {
  auto bytes = encode(x);
  auto back = decode<T>(bytes);
  ASSERT_TRUE(back) << back.error().message << "\n" << bytes;
  EXPECT_EQ(*back, x) << bytes;
  EXPECT_EQ(encode(*back), bytes);
  EXPECT_EQ(encode(x), bytes) << "encoding the same value twice differs";
}

TEST(round_trip, shape_list) {
  expect_round_trip(sample_shape_list());
  expect_round_trip(shape_list{});
}

TEST(round_trip, sandbox_create_request) {
  expect_round_trip(sample_create());
  sandbox_create_request minimal;
  minimal.shape = "s";
  expect_round_trip(minimal);
  minimal.egress = egress_policy::deny_all();
  expect_round_trip(minimal);
}

TEST(round_trip, persistent_create_and_view) {
  sandbox_create_request c;
  c.shape = "s";
  c.persistent = true;
  c.idle_ttl_seconds = 0; // never: kept apart from absent
  c.delete_after_stop_seconds = 1209600;
  expect_round_trip(c);
  EXPECT_NE(encode(c).find("\"persistent\":true"), std::string::npos);
  sandbox_create_request plain;
  plain.shape = "s";
  EXPECT_EQ(encode(plain).find("persistent"), std::string::npos) << "CreateOS never sees it";
  auto v = sample_view();
  v.status = sandbox_status::stopped;
  v.persistent = true;
  v.stopped_at = "2026-12-02T10:00:00.000Z";
  v.last_used_at = "2026-12-02T09:59:00.000Z";
  v.calls_in_progress = 2;
  v.idle_ttl_seconds = 90;
  v.delete_after_stop_seconds = 0;
  expect_round_trip(v);
  for (auto st : {sandbox_status::stopping, sandbox_status::stopped, sandbox_status::starting})
    EXPECT_EQ(sandbox_status_from_string(to_string(st)), st);
}

TEST(round_trip, sandbox_created) {
  expect_round_trip(sample_created());
}

TEST(round_trip, sandbox_view) {
  expect_round_trip(sample_view());
  expect_round_trip(sample_list().data[1]);
}

TEST(round_trip, sandbox_list) {
  expect_round_trip(sample_list());
}

TEST(round_trip, sandbox_deleted) {
  expect_round_trip(sample_deleted());
}

TEST(round_trip, whoami) {
  expect_round_trip(sample_whoami());
}

TEST(round_trip, egress_body) {
  expect_round_trip(sample_egress_body());
  expect_round_trip(egress_body{egress_policy::allow_all()});
  expect_round_trip(egress_body{egress_policy::deny_all()});
}

TEST(round_trip, exec_request) {
  expect_round_trip(sample_exec_request());
  expect_round_trip(exec_request{"true", {}});
}

TEST(round_trip, exec_result) {
  expect_round_trip(sample_exec_result());
  expect_round_trip(exec_result{"", "", 0, std::nullopt, 0});
}

TEST(round_trip, exec_stream_line_every_kind) {
  using k = exec_stream_line::kind;
  for (auto kind : {k::stdout_chunk, k::stderr_chunk, k::error, k::exit_code, k::heartbeat})
    expect_round_trip(sample_stream_line(kind));
}

TEST(round_trip, capabilities) {
  expect_round_trip(sample_capabilities());
  expect_round_trip(capabilities{});
}

TEST(round_trip, jsend_every_status) {
  for (auto k : {jsend::kind::success, jsend::kind::fail, jsend::kind::error})
    expect_round_trip(sample_jsend(k));
}

TEST(round_trip, flow_graph_decoded_from_langflow_export) {
  expect_round_trip(sample_graph());
}

TEST(round_trip, flow_graph_built_in_code) {
  flow_graph g;
  graph_node a{"a", "ChatInput", "Chat Input", {{"input_value", raw_json{R"("hi")"}}}, {}};
  graph_node b{"b", "ChatOutput", "ChatOutput", {}, raw_json{R"([{"name":"message"}])"}};
  g.nodes = {a, b};
  g.edges = {{"a", "b", "message", "input_value"}};
  auto v = validate(g);
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_FALSE(v->payload.empty()) << "validate fills the payload of a graph built in code";
  expect_round_trip(*v);
}

TEST(round_trip, run_event_every_kind) {
  using k = run_event::kind;
  for (auto kind : {k::vertex_started, k::vertex_built, k::vertex_failed, k::stdout_line,
                    k::complete, k::error, k::token, k::message})
    expect_round_trip(event_of(kind));
}

TEST(round_trip, run_event_every_error_code) {
  for (int c = 1; c <= static_cast<int>(last_ec); ++c) {
    auto e = event_of(run_event::kind::error);
    e.code = static_cast<ec>(c);
    expect_round_trip(e);
  }
}

TEST(round_trip, sandbox_result) {
  expect_round_trip(sample_sandbox_result());
}

TEST(round_trip, run_outputs_body_carries_result_data) {
  std::vector<run_outputs> body{sample_run_outputs(), run_outputs{}};
  auto bytes = encode(body);
  auto back = decode_run_outputs(bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, body);
  EXPECT_EQ(encode(*back), bytes);
}

TEST(round_trip, guest_frame_every_kind) {
  using k = guest_frame::kind;
  for (auto kind : {k::note, k::vertex_start, k::step, k::outputs, k::done, k::fatal,
                    k::stdout_line, k::token, k::message, k::state}) {
    auto f = frame_of(kind);
    auto bytes = encode(f);
    auto back = decode_frame(bytes);
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(*back, f) << bytes;
    EXPECT_EQ(encode(*back), bytes);
  }
}

TEST(round_trip, raw_json_is_canonical_and_idempotent) {
  auto r =
      parse_raw_json(" { \"b\" : [1, 2.50, -0, 1E2, true, null], \"a\" : \"\\u00e9\\n\" } ");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->text, R"({"b":[1,2.5,0,100.0,true,null],"a":"é\n"})");
  auto again = parse_raw_json(r->text);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *r);
}

TEST(round_trip, quote_json_escapes_like_the_writer) {
  EXPECT_EQ(quote_json("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  EXPECT_EQ(quote_json(std::string_view{"a\0b", 3}), R"("a\u0000b")");
  auto parsed = parse_raw_json(quote_json("tab\there é"));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->text, quote_json("tab\there é"));
}

// -- byte stability: the exact wire bytes, member order = declaration order ------------

TEST(byte_stable, exec_result_wire_form) {
  EXPECT_EQ(
      encode(exec_result{"o", "e", 3, std::string{"cut"}, 12}),
      R"({"result":{"stdout":"o","stderr":"e","exit_code":3,"error":"cut"},"exec_ms":12})");
  EXPECT_EQ(encode(exec_result{"o", "e", 3, std::nullopt, 12}),
            R"({"result":{"stdout":"o","stderr":"e","exit_code":3},"exec_ms":12})");
}

TEST(byte_stable, stream_lines) {
  using k = exec_stream_line::kind;
  EXPECT_EQ(encode(exec_stream_line{k::stdout_chunk, "a", 0}), R"({"stdout":"a"})");
  EXPECT_EQ(encode(exec_stream_line{k::stderr_chunk, "b", 0}), R"({"stderr":"b"})");
  EXPECT_EQ(encode(exec_stream_line{k::error, "c", 0}), R"({"error":"c"})");
  EXPECT_EQ(encode(exec_stream_line{k::exit_code, "", -1}), R"({"exit_code":-1})");
  EXPECT_EQ(encode(exec_stream_line{k::heartbeat, "", 0}), R"({"hb":true})");
}

TEST(byte_stable, create_request_omits_absent_optionals) {
  sandbox_create_request x;
  x.shape = "s-1";
  EXPECT_EQ(encode(x), R"({"shape":"s-1","egress":["*"],"envs":{},"ingress_enabled":false})");
  x.egress = some_rules();
  x.envs = {{"B", "2"}, {"A", "1"}};
  x.auto_pause_after_seconds = 60;
  EXPECT_EQ(encode(x), R"({"shape":"s-1","egress":["1.2.3.4:80","10.0.0.0/8",)"
                       R"("[2001:db8::/32]:443"],"envs":{"A":"1","B":"2"},)"
                       R"("auto_pause_after_seconds":60,"ingress_enabled":false})");
}

TEST(byte_stable, lists_carry_pagination) {
  EXPECT_EQ(encode(shape_list{{sample_shape()}, 1}),
            R"({"data":[{"id":"s-1vcpu-256mb","vcpu":1,"mem_mib":256,)"
            R"("default_disk_mib":2048}],"pagination":{"total":1}})");
}

TEST(byte_stable, run_events_match_the_design) {
  EXPECT_EQ(encode(event_of(run_event::kind::vertex_failed)),
            R"({"run_id":"run-7","seq":3,"type":"vertex_failed","id":"Prompt-2",)"
            R"("name":"Prompt","error":"KeyError: 'text'"})");
  EXPECT_EQ(encode(event_of(run_event::kind::error)),
            R"({"run_id":"run-7","seq":3,"type":"error","code":"egress_drift",)"
            R"("message":"guest egress changed","executor":"lfx","failed":["Prompt-2"]})");
  auto complete = event_of(run_event::kind::complete);
  complete.run_outputs_list.clear();
  EXPECT_EQ(encode(complete), R"({"run_id":"run-7","seq":3,"type":"complete","outputs":[],)"
                              R"("context":{"turns":2},"executor":"core"})");
  complete.extras.edit().context = {};
  complete.executor.clear();
  EXPECT_EQ(encode(complete), R"({"run_id":"run-7","seq":3,"type":"complete","outputs":[]})")
      << "no `ok`: a run with a failed vertex ends with `error`";
  EXPECT_EQ(encode(event_of(run_event::kind::stdout_line)),
            R"({"run_id":"run-7","seq":3,"type":"stdout","line":"hello from the guest"})");
  EXPECT_EQ(encode(event_of(run_event::kind::token)),
            R"({"run_id":"run-7","seq":3,"type":"token","id":"LLM-3",)"
            R"("data":{"chunk":"Hel","id":"msg-1"}})");
  EXPECT_EQ(encode(event_of(run_event::kind::message)),
            R"({"run_id":"run-7","seq":3,"type":"message","id":"ChatOutput-4",)"
            R"("data":{"text":"Hello","sender":"Machine","session_id":"s-1"}})");
}

TEST(byte_stable, the_cli_json_body_names_the_executor_and_the_failed_vertices) {
  auto complete = event_of(run_event::kind::complete);
  complete.run_outputs_list.clear();
  EXPECT_EQ(encode_run_body(complete, {}), R"({"outputs":[],"executor":"core"})");
  auto failed = event_of(run_event::kind::error);
  failed.code = ec::guest_failed;
  failed.message = "Error building Component Prompt: \n\nKeyError: 'text'";
  EXPECT_EQ(encode_run_body(failed, {{"Prompt-2", "Prompt", "KeyError: 'text'"}}),
            R"({"error":{"code":"guest_failed","message":"Error building Component Prompt: )"
            R"(\n\nKeyError: 'text'"},"executor":"lfx","failed":[{"id":"Prompt-2",)"
            R"("name":"Prompt","error":"KeyError: 'text'"}]})");
  auto error = event_of(run_event::kind::error);
  error.code = ec::cancelled;
  error.message = "run cancelled by the caller";
  EXPECT_EQ(encode_run_body(error, {}),
            R"({"error":{"code":"cancelled","message":"run cancelled by the caller"},)"
            R"("executor":"lfx"})");
}

TEST(byte_stable, raw_json_is_inserted_verbatim) {
  auto e = event_of(run_event::kind::vertex_built);
  e.outputs = raw_json{R"({"z":1,"a":[null]})"};
  EXPECT_EQ(encode(e),
            R"({"run_id":"run-7","seq":3,"type":"vertex_built","id":"Prompt-2",)"
            R"("name":"Prompt","valid":true,"duration_ms":42,)"
            R"("outputs":{"z":1,"a":[null]},"logs":"ok",)"
            R"("result":{"results":{"prompt":{"text":"x"}}},"types":{"prompt":"Message"}})");
}

TEST(byte_stable, sandbox_result_and_jsend_helpers) {
  EXPECT_EQ(encode(sandbox_result{"o", "e", 137, 5}),
            R"({"stdout":"o","stderr":"e","exit_code":137,"execution_time_ms":5})");
  EXPECT_EQ(jsend_success(R"({"a":1})"), R"({"status":"success","data":{"a":1}})");
  EXPECT_EQ(jsend_fail("bad \"name\""),
            R"({"status":"fail","data":{"message":"bad \"name\""}})");
  EXPECT_EQ(jsend_error("boom", 500), R"({"status":"error","message":"boom","code":500})");
}

TEST(byte_stable, graph_payload_is_canonical_across_formatting) {
  auto wrapped = decode<flow_graph>(sample_graph_json(true));
  auto bare = decode<flow_graph>(sample_graph_json(false));
  ASSERT_TRUE(wrapped) << wrapped.error().message;
  ASSERT_TRUE(bare) << bare.error().message;
  EXPECT_EQ(*wrapped, *bare) << "the data wrapper does not change the graph";
  EXPECT_EQ(encode(*wrapped), wrapped->payload.text);
  EXPECT_EQ(wrapped->payload.text.find('\n'), std::string::npos) << "payload is compact";
}

TEST(byte_stable, invalid_utf8_in_values_is_replaced_so_output_always_decodes) {
  run_event e = event_of(run_event::kind::stdout_line);
  e.line = "bad \xff\xfe bytes \xc0\xaf";
  auto bytes = encode(e);
  auto back = decode<run_event>(bytes);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->line, "bad \xEF\xBF\xBD\xEF\xBF\xBD bytes \xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(byte_stable, non_finite_timedelta_encodes_as_null) {
  auto r = sample_result_data();
  r.timedelta = std::numeric_limits<double>::infinity();
  run_outputs ro;
  ro.outputs = {r};
  auto back = decode_run_outputs(encode(std::vector<run_outputs>{ro}));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_FALSE(back->at(0).outputs.at(0)->timedelta.has_value());
}

// The codec writes strings with its own escaper (codec::write_string); its bytes must be
// RapidJSON's Writer::String's, for every byte value, in keys and values, at every place a
// separator goes.
TEST(byte_stable, write_string_writes_what_rapidjson_writes) {
  std::vector<std::string> cases{"", "plain", "a\"b\\c/d", "tab\there\r\n\b\f", "\x7f\x01\x1f"};
  std::string all;
  for (int c = 0; c < 256; ++c)
    all.push_back(static_cast<char>(c));
  cases.push_back(all);
  cases.push_back(std::string(100, 'x') + "\x19" + std::string(9, 'y') + "\xc3\xa9\"");
  for (int c = 0; c < 256; ++c)
    cases.push_back(std::string{"ab"} + static_cast<char>(c) + "cdefghijk");
  rapidjson::StringBuffer want_buf, got_buf;
  rapidjson::Writer<rapidjson::StringBuffer> want{want_buf}, got{got_buf};
  want.StartArray();
  got.StartArray();
  for (auto& s : cases) {
    want.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    codec::write_string(got, got_buf, s);
    want.StartObject();
    got.StartObject();
    want.Key(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    codec::write_string(got, got_buf, s);
    want.String(s.data(), static_cast<rapidjson::SizeType>(s.size()));
    codec::write_string(got, got_buf, s);
    want.EndObject();
    got.EndObject();
  }
  want.EndArray();
  got.EndArray();
  EXPECT_EQ(std::string(got_buf.GetString(), got_buf.GetSize()),
            std::string(want_buf.GetString(), want_buf.GetSize()));
}

} // namespace
} // namespace guestflow
