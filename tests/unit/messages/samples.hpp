#pragma once

// Fully populated sample values of every message type, and every decoder behind one
// signature, shared by the round-trip, malformed-input, fuzz and CAF tests.

#include "messages/egress.hpp"
#include "messages/execution.hpp"
#include "messages/graph.hpp"
#include "messages/jsend.hpp"
#include "messages/json.hpp"
#include "messages/run.hpp"
#include "messages/sandbox.hpp"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow::test {

inline egress_rule rule(std::string_view text) {
  return *parse_egress_rule(text);
}

inline egress_policy some_rules() {
  return *parse_egress({"10.0.0.0/8", "[2001:db8::/32]:443", "1.2.3.4:80"});
}

inline shape sample_shape() {
  return {"s-1vcpu-256mb", 1, 256, 2048};
}

inline shape_list sample_shape_list() {
  return {{sample_shape(), {"s-2vcpu-1gb", 2, 1024, 4096}}, 7};
}

inline sandbox_create_request sample_create() {
  sandbox_create_request x;
  x.shape = "s-1vcpu-256mb";
  x.rootfs = "devbox:1";
  x.name = "lf-exec-0a1b";
  x.egress = some_rules();
  x.envs = {{"LANG", "C.UTF-8"}, {"TOKEN", "s3cr=t \xc3\xa9"}};
  x.auto_pause_after_seconds = 600;
  x.ingress_enabled = true;
  return x;
}

inline sandbox_created sample_created() {
  return {"sb-1", "lf-exec-0a1b", "10.1.2.3", "s-1vcpu-256mb",          "devbox:1", 1,
          256,    2048,           187,        egress_policy::deny_all()};
}

inline sandbox_view sample_view() {
  sandbox_view x;
  x.id = "sb-1";
  x.name = "lf-exec-0a1b";
  x.status = sandbox_status::paused;
  x.shape = "s-1vcpu-256mb";
  x.egress = some_rules();
  x.envs = {"LANG", "TOKEN"};
  x.created_at = "2024-05-01T10:00:00Z";
  x.paused_at = "2024-05-01T10:10:00Z";
  x.last_resumed_at = "2024-05-01T10:05:00Z";
  x.auto_pause_after_seconds = 600;
  return x;
}

inline sandbox_list sample_list() {
  sandbox_view minimal;
  minimal.id = "sb-2";
  minimal.status = sandbox_status::running;
  return {{sample_view(), minimal}, 2};
}

inline sandbox_deleted sample_deleted() {
  return {"sb-1", sandbox_status::destroying};
}

inline whoami sample_whoami() {
  return {"u-42", 3, 2, 1, 6};
}

inline egress_body sample_egress_body() {
  return {some_rules()};
}

inline exec_request sample_exec_request() {
  return {"timeout", {"--signal=KILL", "30", "python3", "-c", "print('hi \"there\"')"}};
}

inline exec_result sample_exec_result() {
  return {"out\n", "err\n", -1, std::string{"stdout truncated at 1 MiB"}, 1234};
}

inline exec_stream_line sample_stream_line(exec_stream_line::kind k) {
  exec_stream_line x;
  x.type = k;
  if (k == exec_stream_line::kind::exit_code)
    x.exit_code = 137;
  else if (k != exec_stream_line::kind::heartbeat)
    x.text = "chunk \u00e9\n";
  return x;
}

inline capabilities sample_capabilities() {
  return {"namespaces", true, true, false, true, 900};
}

inline jsend sample_jsend(jsend::kind k) {
  jsend x;
  x.status = k;
  switch (k) {
  case jsend::kind::success:
    x.data = raw_json{R"({"id":"sb-1","n":[1,2.5,true,null]})"};
    break;
  case jsend::kind::fail:
    x.data = raw_json{R"({"message":"name already in use","field":"name"})"};
    x.message = "name already in use";
    break;
  case jsend::kind::error:
    x.message = "backend exploded";
    x.code = 503;
    break;
  }
  return x;
}

/// A small Langflow export: ChatInput -> Prompt -> ChatOutput with a side branch, one
/// handle stored as an "œ"-encoded string as Langflow sometimes does.
inline std::string sample_graph_json(bool wrapped = true) {
  std::string nodes = R"([
    {"id":"ChatInput-1","type":"genericNode","data":{"type":"ChatInput","id":"ChatInput-1",
      "node":{"display_name":"Chat Input","template":{"_type":"Component",
        "input_value":{"type":"str","value":"hello"},"should_store":{"value":true},
        "no_value":{"type":"str"}},"outputs":[{"name":"message","types":["Message"]}]}}},
    {"id":"Prompt-2","data":{"type":"Prompt","node":{"template":{
        "template":{"value":"Say {text}"},"nums":{"value":[1,2.5,-3,1e300]}}}}},
    {"id":"ChatOutput-3","data":{"type":"ChatOutput","node":{"display_name":"Chat Output"}}},
    {"id":"Note-4","data":{"type":"note"}}
  ])";
  std::string edges = R"([
    {"source":"ChatInput-1","target":"Prompt-2","data":{
      "sourceHandle":{"dataType":"ChatInput","id":"ChatInput-1","name":"message"},
      "targetHandle":{"fieldName":"text","id":"Prompt-2","type":"str"}}},
    {"source":"Prompt-2","target":"ChatOutput-3","data":{
      "sourceHandle":"{œdataTypeœ:œPromptœ,œnameœ:œpromptœ}",
      "targetHandle":"{œfieldNameœ:œinput_valueœ}"}},
    {"source":"ChatInput-1","target":"ChatOutput-3"}
  ])";
  if (wrapped)
    return R"({"id":"flow-1","name":"demo","data":{"nodes":)" + nodes + R"(,"edges":)" + edges +
           R"(,"viewport":{"x":0}}})";
  return R"({"nodes":)" + nodes + R"(,"edges":)" + edges + "}";
}

inline flow_graph sample_graph() {
  return *decode<flow_graph>(sample_graph_json());
}

inline result_data sample_result_data() {
  result_data x;
  x.results = raw_json{R"({"message":{"text":"hi"}})"};
  x.artifacts = raw_json{R"({"message":"hi"})"};
  x.outputs = raw_json{R"({"message":{"message":"hi","type":"text"}})"};
  x.logs = raw_json{R"({"message":[]})"};
  x.messages = raw_json{R"([{"message":"hi","sender":"Machine"}])"};
  x.timedelta = 0.125;
  x.duration = "125 ms";
  x.component_display_name = "Chat Output";
  x.component_id = "ChatOutput-3";
  x.used_frozen_result = true;
  return x;
}

inline run_outputs sample_run_outputs() {
  run_outputs x;
  x.inputs = raw_json{R"({"input_value":"hello"})"};
  x.outputs = {sample_result_data(), std::nullopt, result_data{}};
  return x;
}

inline guest_frame frame_of(guest_frame::kind k) {
  guest_frame f;
  f.type = k;
  switch (k) {
  case guest_frame::kind::note:
    f.line = R"({"t":"note","executor":"lfx","msg":"lfx 0.1 found"})";
    f.executor = "lfx";
    break;
  case guest_frame::kind::vertex_start:
    f.id = "Prompt-2";
    f.name = "Prompt";
    break;
  case guest_frame::kind::step:
    f.id = "Prompt-2";
    f.name = "Prompt";
    f.valid = true;
    f.duration_ms = 42;
    f.vertex_outputs = raw_json{R"({"prompt":{"message":"Say hello"}})"};
    f.logs = "built\n";
    f.extras.edit().result =
        raw_json{R"({"results":{"prompt":{"text":"Say hello"}},"component_id":"Prompt-2"})"};
    f.extras.edit().types = raw_json{R"({"prompt":"Message"})"};
    break;
  case guest_frame::kind::token:
    f.id = "LLM-3";
    f.extras.edit().data = raw_json{R"({"chunk":"Hel","id":"msg-1"})"};
    break;
  case guest_frame::kind::message:
    f.id = "ChatOutput-4";
    f.extras.edit().data =
        raw_json{R"({"text":"Hello","sender":"Machine","session_id":"s-1","id":"msg-1"})"};
    break;
  case guest_frame::kind::state:
    f.extras.edit().context = raw_json{R"({"turns":2,"seen":["a"]})"};
    break;
  case guest_frame::kind::outputs:
    f.run_outputs_list = {sample_run_outputs(), run_outputs{}};
    break;
  case guest_frame::kind::done:
    break;
  case guest_frame::kind::fatal:
    f.error = "ValueError: boom";
    f.traceback = "Traceback (most recent call last):\n  ...";
    f.code = "bad_request";
    break;
  case guest_frame::kind::stdout_line:
    f.line = "user printed {\"t\": this";
    break;
  }
  return f;
}

inline run_event event_of(run_event::kind k) {
  run_event e;
  e.run_id = "run-7";
  e.seq = 3;
  e.type = k;
  switch (k) {
  case run_event::kind::vertex_started:
    e.id = "Prompt-2";
    e.name = "Prompt";
    break;
  case run_event::kind::vertex_built:
    e.id = "Prompt-2";
    e.name = "Prompt";
    e.valid = true;
    e.duration_ms = 42;
    e.outputs = raw_json{R"({"prompt":"x"})"};
    e.logs = "ok";
    e.extras.edit().result = raw_json{R"({"results":{"prompt":{"text":"x"}}})"};
    e.extras.edit().types = raw_json{R"({"prompt":"Message"})"};
    break;
  case run_event::kind::token:
    e.id = "LLM-3";
    e.extras.edit().data = raw_json{R"({"chunk":"Hel","id":"msg-1"})"};
    break;
  case run_event::kind::message:
    e.id = "ChatOutput-4";
    e.extras.edit().data =
        raw_json{R"({"text":"Hello","sender":"Machine","session_id":"s-1"})"};
    break;
  case run_event::kind::vertex_failed:
    e.id = "Prompt-2";
    e.name = "Prompt";
    e.message = "KeyError: 'text'";
    break;
  case run_event::kind::stdout_line:
    e.line = "hello from the guest";
    break;
  case run_event::kind::complete:
    e.run_outputs_list = {sample_run_outputs()};
    e.executor = "core";
    e.extras.edit().context = raw_json{R"({"turns":2})"};
    break;
  case run_event::kind::error:
    e.code = ec::egress_drift;
    e.message = "guest egress changed";
    e.executor = "lfx";
    e.failed = {"Prompt-2"};
    break;
  }
  return e;
}

inline sandbox_result sample_sandbox_result() {
  return {"42\n", "", -1, 30001};
}

/// Every decoder behind one signature: the failure, or nullopt on success.
using decoder = std::function<std::optional<failure>(std::string_view, const decode_limits&)>;

template<class T>
decoder decoder_for() {
  return [](std::string_view text, const decode_limits& limits) -> std::optional<failure> {
    auto r = decode<T>(text, limits);
    if (r) return std::nullopt;
    return r.error();
  };
}

inline const std::map<std::string, decoder>& decoders() {
  static const std::map<std::string, decoder> all{
      {"shape_list", decoder_for<shape_list>()},
      {"create", decoder_for<sandbox_create_request>()},
      {"created", decoder_for<sandbox_created>()},
      {"view", decoder_for<sandbox_view>()},
      {"list", decoder_for<sandbox_list>()},
      {"deleted", decoder_for<sandbox_deleted>()},
      {"whoami", decoder_for<whoami>()},
      {"egress_body", decoder_for<egress_body>()},
      {"exec_request", decoder_for<exec_request>()},
      {"exec_result", decoder_for<exec_result>()},
      {"stream_line", decoder_for<exec_stream_line>()},
      {"capabilities", decoder_for<capabilities>()},
      {"jsend", decoder_for<jsend>()},
      {"graph", decoder_for<flow_graph>()},
      {"run_event", decoder_for<run_event>()},
      {"sandbox_result", decoder_for<sandbox_result>()},
      {"raw_json",
       [](std::string_view t, const decode_limits& l) -> std::optional<failure> {
         auto r = parse_raw_json(t, l);
         return r ? std::nullopt : std::optional<failure>{r.error()};
       }},
      {"frame",
       [](std::string_view t, const decode_limits& l) -> std::optional<failure> {
         auto r = decode_frame(t, l);
         return r ? std::nullopt : std::optional<failure>{r.error()};
       }},
      {"run_outputs",
       [](std::string_view t, const decode_limits& l) -> std::optional<failure> {
         auto r = decode_run_outputs(t, l);
         return r ? std::nullopt : std::optional<failure>{r.error()};
       }},
  };
  return all;
}

} // namespace guestflow::test
