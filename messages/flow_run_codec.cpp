#include "messages/flow_run.hpp"
#include "messages/json_codec.hpp"

#include <algorithm>

namespace guestflow {

namespace {

constexpr uint64_t max_timeout_seconds = 86'400;

/// A decoder failure of an embedded document, re-rooted at `prefix` ("document: x" →
/// "flow: x", "nodes[0].id: x" → "flow.nodes[0].id: x").
failure rerooted(failure f, std::string_view prefix) {
  constexpr std::string_view root = "document";
  std::string msg{prefix};
  if (f.message.compare(0, root.size(), root) == 0)
    msg.append(f.message, root.size(), std::string::npos);
  else if (!f.message.empty() && f.message[0] == '[')
    msg += f.message;
  else
    msg += "." + f.message;
  f.message = std::move(msg);
  return f;
}

std::optional<std::string> opt_string(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return std::nullopt;
  return codec::as_string(*v, o.at(key));
}

run_input input_of(const value& v, const path& p) {
  run_input x;
  if (v.IsString()) {
    x.input_value = codec::as_string(v, p);
    return x;
  }
  object_view o{v, p};
  x.input_value = opt_string(o, "input_value");
  // `type` is lfx's InputValueRequest field; `input_type` is /api/v1/run's name for it.
  auto type_key = o.find("type") != nullptr ? "type" : "input_type";
  if (auto t = opt_string(o, type_key)) {
    if (*t != "chat" && *t != "text" && *t != "any")
      codec::raise(o.at(type_key),
                   "expected \"chat\", \"text\" or \"any\", got " + quote_json(*t));
    x.type = std::move(*t);
  }
  x.session = opt_string(o, "session");
  x.components = strings_of(o, "components", true);
  return x;
}

void write_input(json_writer& w, const run_input& x) {
  w.begin_object().key("input_value");
  if (x.input_value)
    w.str(*x.input_value);
  else
    w.null();
  w.field("type", x.type);
  w.opt_field("session", x.session);
  w.field("components", x.components).end_object();
}

using caps = run_request_caps;

/// A size-capped identifier string (session_id, user_id); absent or null → nullopt.
std::optional<std::string> capped_id(const object_view& o, std::string_view key) {
  auto s = o.opt_str(key);
  if (!s) return s;
  auto at = o.at(key);
  if (s->size() > caps::id_bytes)
    codec::raise(at, std::to_string(s->size()) + " bytes exceeds the limit of " +
                         std::to_string(caps::id_bytes));
  codec::no_nul(*s, at);
  return s;
}

/// An object member kept canonical; absent or null → empty.
raw_json object_or_empty(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return {};
  auto at = o.at(key);
  codec::expect_object(*v, at);
  return codec::canonical(*v, at);
}

/// `variables`: names → strings. Errors name the variable (its name, shortened when it is
/// not one), never its value.
secret_vars variables_of(const object_view& o) {
  secret_vars out;
  auto v = o.find("variables");
  if (v == nullptr) return out;
  auto at = o.at("variables");
  codec::expect_object(*v, at);
  if (v->MemberCount() > caps::variables)
    codec::raise(at, std::to_string(v->MemberCount()) + " variables exceeds the limit of " +
                         std::to_string(caps::variables));
  for (auto& m : v->GetObject()) {
    std::string_view name{m.name.GetString(), m.name.GetStringLength()};
    if (!is_variable_name(name)) {
      auto shown = codec::sanitize_utf8(name.substr(0, 64));
      codec::raise(at, quote_json(shown) + (name.size() > 64 ? "…" : "") +
                           " is not a variable name (letters, digits and _, not starting "
                           "with a digit, at most " +
                           std::to_string(caps::variable_name_bytes) + " bytes)");
    }
    auto vat = at.field(name);
    if (!m.value.IsString())
      codec::raise(vat, std::string{"expected string, got "} + codec::type_name(m.value));
    std::string value{m.value.GetString(), m.value.GetStringLength()};
    if (value.size() > caps::variable_value_bytes)
      codec::raise(vat, "value of " + std::to_string(value.size()) +
                            " bytes exceeds the limit of " +
                            std::to_string(caps::variable_value_bytes));
    codec::no_nul(value, vat);
    out.set(std::string{name}, std::move(value));
  }
  return out;
}

/// `history`: a list of message objects, each kept canonical.
std::optional<std::vector<raw_json>> history_of(const object_view& o) {
  auto v = o.find("history");
  if (v == nullptr) return std::nullopt;
  auto at = o.at("history");
  codec::expect_array(*v, at);
  if (v->Size() > caps::history_messages)
    codec::raise(at, std::to_string(v->Size()) + " messages exceeds the limit of " +
                         std::to_string(caps::history_messages));
  std::vector<raw_json> out;
  out.reserve(v->Size());
  size_t i = 0;
  for (auto& m : v->GetArray()) {
    auto mat = at.at(i++);
    codec::expect_object(m, mat);
    out.push_back(codec::canonical(m, mat));
  }
  return out;
}

void write_history(json_writer& w, const std::optional<std::vector<raw_json>>& history) {
  if (!history) return;
  w.key("history").begin_array();
  for (auto& m : *history)
    w.raw(m);
  w.end_array();
}

void write_variables(json_writer& w, const secret_vars::map_type& values) {
  w.begin_object();
  for (auto& [name, value] : values)
    w.field(name, value);
  w.end_object();
}

} // namespace

bool is_variable_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > run_request_caps::variable_name_bytes) return false;
  auto alpha = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
  };
  if (!alpha(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

run_request redacted(const run_request& x) {
  auto out = x;
  out.variables = secret_vars{x.variables.redacted()};
  return out;
}

// -- run_request ------------------------------------------------------------------------

bool is_executor_name(std::string_view name) noexcept {
  return name == "auto" || name == "core" || name == "lfx";
}

template<>
result<run_request> decode<run_request>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<run_request>(
      text, limits, [&](const value& v, const path& p) -> result<run_request> {
        object_view o{v, p};
        run_request x;
        // Decoded from the request's own tree: one parse of the (large) flow, not two.
        x.graph = codec::flow_graph_of(o.need("flow"), o.at("flow"));
        if (auto in = o.find("inputs")) x.inputs = codec::canonical(*in, o.at("inputs"));
        if (auto ro = o.find("runtime_options")) {
          codec::expect_object(*ro, o.at("runtime_options"));
          x.runtime_options = codec::canonical(*ro, o.at("runtime_options"));
        }
        x.outputs = strings_of(o, "outputs", true);
        x.stream = o.boolean_or("stream", true);
        x.cancel_on_disconnect = o.boolean_or("cancel_on_disconnect", false);
        if (auto ex = o.opt_str("executor")) {
          if (!is_executor_name(*ex))
            codec::raise(o.at("executor"),
                         quote_json(*ex) + " is not an executor (expected auto, core or lfx)");
          x.executor = std::move(*ex);
        }
        if (auto t = o.find("timeout_seconds")) {
          auto at = o.at("timeout_seconds");
          auto secs = codec::as_uint(*t, at);
          if (secs == 0 || secs > max_timeout_seconds)
            codec::raise(at, std::to_string(secs) + " out of range (expected 1..86400)");
          x.timeout_seconds = static_cast<uint32_t>(secs);
        }
        x.session_id = capped_id(o, "session_id");
        x.user_id = capped_id(o, "user_id");
        x.context = object_or_empty(o, "context");
        x.tweaks = object_or_empty(o, "tweaks");
        x.variables = variables_of(o);
        x.history = history_of(o);
        return x;
      });
}

std::string encode(const run_request& x) {
  json_writer w;
  w.begin_object().field("flow", x.graph.payload);
  w.raw_field_if("inputs", x.inputs).raw_field_if("runtime_options", x.runtime_options);
  w.field("outputs", x.outputs);
  w.field("stream", x.stream).opt_field("timeout_seconds", x.timeout_seconds);
  w.field("cancel_on_disconnect", x.cancel_on_disconnect).opt_field("executor", x.executor);
  w.opt_field("session_id", x.session_id).opt_field("user_id", x.user_id);
  w.raw_field_if("context", x.context).raw_field_if("tweaks", x.tweaks);
  if (!x.variables.empty()) {
    w.key("variables");
    write_variables(w, x.variables.redacted());
  }
  write_history(w, x.history);
  w.end_object();
  return w.take();
}

// -- input normalization building blocks ------------------------------------------------

result<std::vector<run_input>> decode_run_inputs(const raw_json& value,
                                                 std::string_view field) {
  using list = std::vector<run_input>;
  if (value.empty()) return list{};
  auto r = codec::decode_with<list>(value.text, {}, [](const codec::value& v, const path& p) {
    list out;
    if (v.IsNull()) return result<list>{std::move(out)};
    if (v.IsArray()) {
      size_t i = 0;
      for (auto& e : v.GetArray()) {
        auto at = p.at(i++);
        if (!e.IsObject())
          codec::raise(at, std::string{"expected object, got "} + codec::type_name(e));
        out.push_back(input_of(e, at));
      }
    } else if (v.IsString() || v.IsObject()) {
      out.push_back(input_of(v, p));
    } else {
      codec::raise(p, std::string{"expected a string, an object or a list of objects, got "} +
                          codec::type_name(v));
    }
    return result<list>{std::move(out)};
  });
  if (!r) return rerooted(std::move(r).error(), field);
  return r;
}

result<std::vector<json_member>> decode_members(const raw_json& object,
                                                std::string_view field) {
  using list = std::vector<json_member>;
  if (object.empty()) return list{};
  auto r = codec::decode_with<list>(object.text, {}, [](const value& v, const path& p) {
    list out;
    if (v.IsNull()) return result<list>{std::move(out)};
    codec::expect_object(v, p);
    for (auto& m : v.GetObject()) {
      std::string_view key{m.name.GetString(), m.name.GetStringLength()};
      out.push_back({std::string{key}, codec::canonical(m.value, p.field(key))});
    }
    return result<list>{std::move(out)};
  });
  if (!r) return rerooted(std::move(r).error(), field);
  return r;
}

raw_json encode_members(const std::vector<json_member>& members) {
  json_writer w;
  w.begin_object();
  for (auto& m : members)
    w.field(m.key, m.value);
  w.end_object();
  return raw_json{w.take()};
}

json_type type_of(const raw_json& x) noexcept {
  if (x.text.empty()) return json_type::absent;
  switch (x.text[0]) {
  case 'n':
    return json_type::null;
  case 't':
  case 'f':
    return json_type::boolean;
  case '"':
    return json_type::string;
  case '[':
    return json_type::array;
  case '{':
    return json_type::object;
  default:
    return x.text.find_first_of(".eE") == std::string::npos ? json_type::integer
                                                            : json_type::number;
  }
}

std::optional<std::string> error_member(const raw_json& x) {
  if (type_of(x) != json_type::object) return std::nullopt;
  auto r = codec::decode_with<std::optional<std::string>>(
      x.text, {}, [](const value& v, const path& p) {
        object_view o{v, p};
        auto e = o.find("error");
        std::optional<std::string> out;
        if (e != nullptr && e->IsString()) out = codec::as_string(*e, o.at("error"));
        return result<std::optional<std::string>>{std::move(out)};
      });
  return r ? std::move(*r) : std::nullopt;
}

// -- guest spec -------------------------------------------------------------------------

std::string encode(const guest_run_spec& x) {
  json_writer w;
  w.begin_object().field("graph", x.graph).key("inputs").begin_array();
  for (auto& in : x.inputs)
    write_input(w, in);
  w.end_array();
  w.field("outputs", x.outputs);
  w.key("runtime_options");
  if (x.runtime_options.empty())
    w.begin_object().end_object();
  else
    w.raw(x.runtime_options);
  w.field("install_lfx", x.install_lfx);
  w.field("pip", x.pip).field("executor", x.executor);
  w.opt_field("session_id", x.session_id).opt_field("user_id", x.user_id);
  w.raw_field_if("context", x.context).raw_field_if("tweaks", x.tweaks);
  write_history(w, x.history);
  w.end_object();
  return w.take();
}

std::string encode_variables(const secret_vars& x) {
  json_writer w;
  write_variables(w, x.reveal());
  return w.take();
}

} // namespace guestflow
