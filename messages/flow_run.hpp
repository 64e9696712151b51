#pragma once

// The whole-flow executor's value types: what a caller asks for (`run_request`), the
// caller inputs it normalizes to (`run_input`), the program spec a guest runner reads
// (`guest_run_spec`), and the coordinator's admission counters.

#include "messages/error.hpp"
#include "messages/graph.hpp"
#include "messages/json.hpp"
#include "messages/secret.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// One caller input as lfx's `InputValueRequest`: `{input_value, type, session,
/// components}`. `type` is "chat", "text" or "any" (every input vertex); absent means
/// "chat", Graph.arun's default (and the runner's).
struct run_input {
  std::optional<std::string> input_value; ///< null: the input vertex keeps its own value
  std::string type = "chat";
  std::optional<std::string> session;
  std::vector<std::string> components; ///< vertex ids the value is for; empty = by type
  friend bool operator==(const run_input& a, const run_input& b) {
    return a.input_value == b.input_value && a.type == b.type && a.session == b.session &&
           a.components == b.components;
  }
  friend bool operator!=(const run_input& a, const run_input& b) { return !(a == b); }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_input& x) {
  return f(x.input_value, x.type, x.session, x.components);
}

/// Caps on a run request's runtime state (decode refuses more, naming the field).
struct run_request_caps {
  static constexpr size_t id_bytes = 1024;           ///< session_id, user_id
  static constexpr size_t variables = 256;           ///< entries
  static constexpr size_t variable_name_bytes = 128; ///< an environment-variable-like name
  static constexpr size_t variable_value_bytes = size_t{64} << 10;
  static constexpr size_t history_messages = 10'000;
};

/// True for an environment-variable-like name: `[A-Za-z_][A-Za-z0-9_]*`, ≤ 128 bytes.
bool is_variable_name(std::string_view name) noexcept;

/// A whole-flow run as a caller asks for it (the bridge's HTTP body, or the CLI). Inputs
/// and runtime options stay as the caller sent them: the coordinator normalizes them (the
/// two may disagree, and only it knows which keys cross into the guest).
struct run_request {
  flow_graph graph;
  raw_json inputs;          ///< `inputs` as sent (string | object | list); empty = absent
  raw_json runtime_options; ///< `runtime_options` object as sent; empty = absent
  std::vector<std::string> outputs; ///< vertex ids or display names; empty = output vertices
  std::optional<uint32_t> timeout_seconds; ///< ≤ the executor's limit; nullopt = the limit
  /// The caller wants NDJSON events (bridge only; the coordinator ignores it).
  bool stream = true;
  /// A streamed caller that drops its connection cancels the run (bridge only).
  bool cancel_on_disconnect = false;
  /// The guest executor ("auto" | "core" | "lfx", see is_executor_name); nullopt = the
  /// executor settings' choice.
  std::optional<std::string> executor;
  /// Langflow's runtime state on the graph (`graph.session_id`, `graph.user_id`): memory
  /// is keyed by the session.
  std::optional<std::string> session_id;
  std::optional<std::string> user_id;
  raw_json context; ///< object: request variables set on `graph.context`; empty = absent
  raw_json tweaks;  ///< object: `{vertex id or display name: {field: value}}`; empty = absent
  /// Secrets for `load_from_db` fields: shipped to the guest as variables.json, never in
  /// spec.json, and scrubbed from everything the run prints.
  secret_vars variables;
  /// The session's prior messages (Langflow message dicts, oldest first); nullopt = the
  /// caller sent none (serve may then use its own store), an empty list = "no history".
  std::optional<std::vector<raw_json>> history;
  friend bool operator==(const run_request& a, const run_request& b) {
    return a.graph == b.graph && a.inputs == b.inputs &&
           a.runtime_options == b.runtime_options && a.outputs == b.outputs &&
           a.timeout_seconds == b.timeout_seconds && a.stream == b.stream &&
           a.cancel_on_disconnect == b.cancel_on_disconnect && a.executor == b.executor &&
           a.session_id == b.session_id && a.user_id == b.user_id && a.context == b.context &&
           a.tweaks == b.tweaks && a.variables == b.variables && a.history == b.history;
  }
  friend bool operator!=(const run_request& a, const run_request& b) { return !(a == b); }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_request& x) {
  return f(x.graph, x.inputs, x.runtime_options, x.outputs, x.timeout_seconds, x.stream,
           x.cancel_on_disconnect, x.executor, x.session_id, x.user_id, x.context, x.tweaks,
           x.variables, x.history);
}

/// `x` as its encoding shows it: every variable's value "********".
run_request redacted(const run_request& x);

/// The guest runner's executors: "lfx" (Langflow's own engine, when the guest's image has
/// it), "core" (the runner's built-in components) and "auto" (lfx when it imports).
bool is_executor_name(std::string_view name) noexcept;

/// Decodes the bridge's body `{flow, inputs?, runtime_options?, outputs?, stream? (true),
/// timeout_seconds?, cancel_on_disconnect? (false), executor?, session_id?, user_id?,
/// context?, tweaks?, variables?, history?}`; `flow` is a `Graph.dump()`
/// (`{data:{nodes,edges}}` or bare) and is validated like `decode<flow_graph>` (errors name
/// `flow.…`). `context` and `tweaks` are objects, kept canonical; `variables` an object of
/// names (is_variable_name) to strings without NUL; `history` a list of objects; all within
/// run_request_caps. An error names the field (and a variable's name), never a variable's
/// value. Unknown keys are ignored.
template<>
result<run_request> decode<run_request>(std::string_view, const decode_limits&);
/// The body decode<run_request> reads, with each variable's value "********": an encoded
/// request never carries a secret (decode(encode(x)) == redacted(x)).
std::string encode(const run_request& x);

/// The coordinator's admission counters.
struct coordinator_stats {
  uint64_t inflight = 0; ///< executions holding a slot
  uint64_t queued = 0;   ///< admitted runs waiting for a slot
  uint64_t runs = 0;     ///< run actors alive (running, queued or retained for late joiners)
  uint64_t accepted = 0; ///< runs admitted since start
  uint64_t refused = 0;  ///< runs refused with `capacity`
  uint64_t finished = 0; ///< runs that emitted their terminal event
  friend bool operator==(const coordinator_stats& a, const coordinator_stats& b) {
    return a.inflight == b.inflight && a.queued == b.queued && a.runs == b.runs &&
           a.accepted == b.accepted && a.refused == b.refused && a.finished == b.finished;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, coordinator_stats& x) {
  return f(x.inflight, x.queued, x.runs, x.accepted, x.refused, x.finished);
}

// -- building blocks for input normalization (policy lives in actors/run_inputs) ---------

/// The caller input forms, decoded: a string; `{input_value, type?|input_type?, session?,
/// components?}`; or a list of such objects. `null` yields no inputs. `field` names the
/// value in errors ("runtime_options.initial_inputs[1].type: …").
result<std::vector<run_input>> decode_run_inputs(const raw_json& value, std::string_view field);

/// One top-level member of a JSON object, value kept as canonical JSON.
struct json_member {
  std::string key;
  raw_json value;
  friend bool operator==(const json_member& a, const json_member& b) {
    return a.key == b.key && a.value == b.value;
  }
};

/// The members of a JSON object in document order (`null` → none); anything else is
/// bad_request naming `field`.
result<std::vector<json_member>> decode_members(const raw_json& object, std::string_view field);

/// The object made of `members`, in order (canonical, so equal inputs give equal text).
raw_json encode_members(const std::vector<json_member>& members);

/// The JSON type of a canonical value (integer = a number without fraction or exponent).
enum class json_type : uint8_t {
  absent,
  null,
  boolean,
  integer,
  number,
  string,
  array,
  object
};
json_type type_of(const raw_json& x) noexcept;

/// The top-level `"error"` string of a JSON object, if it has one (vertex outputs of a
/// failed vertex usually do).
std::optional<std::string> error_member(const raw_json& x);

/// What the guest runner reads from /tmp/run/spec.json (see guest/runner.py):
/// `{"graph":{"nodes","edges"},"inputs":[…],"outputs":[…],"runtime_options":{…},
/// "install_lfx":bool,"pip":[…],"executor":"auto"|"core"|"lfx", "session_id"?,
/// "user_id"?, "context"?:{…}, "tweaks"?:{…}, "history"?:[…]}` (the optional keys absent
/// when the request had none). Secrets are not in it: see encode_variables.
struct guest_run_spec {
  raw_json graph; ///< flow_graph::payload
  std::vector<run_input> inputs;
  std::vector<std::string> outputs;
  raw_json runtime_options; ///< forwarded keys only; empty → {}
  bool install_lfx = false;
  std::vector<std::string> pip;
  std::string executor = "auto";
  std::optional<std::string> session_id;
  std::optional<std::string> user_id;
  raw_json context; ///< object; empty = absent
  raw_json tweaks;  ///< object; empty = absent
  std::optional<std::vector<raw_json>> history;
};

std::string encode(const guest_run_spec& x);

/// The bundle's variables.json, `{"NAME":"VALUE",…}`: the one encoder that writes the
/// values (the runner reads the file and unlinks it before anything else runs).
std::string encode_variables(const secret_vars& x);

} // namespace guestflow
