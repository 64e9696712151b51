#include "messages/json_codec.hpp"
#include "messages/run.hpp"

#include <array>
#include <cmath>

namespace guestflow {

namespace {

constexpr std::array<std::string_view, 8> event_names{
    "vertex_started", "vertex_built", "vertex_failed", "stdout",
    "complete",       "error",        "token",         "message",
};

// -- ResultData / RunOutputs ------------------------------------------------------------

result_data result_data_of(const value& v, const path& p) {
  object_view o{v, p};
  result_data x;
  x.results = o.raw_or_empty("results");
  x.artifacts = o.raw_or_empty("artifacts");
  x.outputs = o.raw_or_empty("outputs");
  x.logs = o.raw_or_empty("logs");
  x.messages = o.raw_or_empty("messages");
  if (auto t = o.find("timedelta")) x.timedelta = codec::as_double(*t, o.at("timedelta"));
  x.duration = o.opt_str("duration");
  x.component_display_name = o.str_or("component_display_name", "");
  x.component_id = o.str_or("component_id", "");
  x.used_frozen_result = o.boolean_or("used_frozen_result", false);
  return x;
}

run_outputs run_outputs_of(const value& v, const path& p) {
  object_view o{v, p};
  run_outputs x;
  if (auto in = o.raw("inputs")) {
    if (!in->IsNull()) codec::expect_object(*in, o.at("inputs"));
    x.inputs = codec::canonical(*in, o.at("inputs"));
  }
  if (auto outs = o.find("outputs")) {
    auto at = o.at("outputs");
    codec::expect_array(*outs, at);
    size_t i = 0;
    for (auto& r : outs->GetArray()) {
      auto ri = at.at(i++);
      if (r.IsNull())
        x.outputs.emplace_back(std::nullopt);
      else
        x.outputs.emplace_back(result_data_of(r, ri));
    }
  }
  return x;
}

std::vector<run_outputs> run_outputs_list_of(const object_view& o, std::string_view key) {
  auto at = o.at(key);
  auto& arr = o.need(key);
  codec::expect_array(arr, at);
  std::vector<run_outputs> out;
  size_t i = 0;
  for (auto& x : arr.GetArray())
    out.push_back(run_outputs_of(x, at.at(i++)));
  return out;
}

void write_result_data(json_writer& w, const result_data& x) {
  w.begin_object()
      .raw_field_if("results", x.results)
      .raw_field_if("artifacts", x.artifacts)
      .raw_field_if("outputs", x.outputs)
      .raw_field_if("logs", x.logs)
      .raw_field_if("messages", x.messages)
      .opt_field("timedelta", x.timedelta)
      .opt_field("duration", x.duration)
      .field("component_display_name", x.component_display_name)
      .field("component_id", x.component_id)
      .field("used_frozen_result", x.used_frozen_result)
      .end_object();
}

void write_run_outputs(json_writer& w, const run_outputs& x) {
  w.begin_object().raw_field_if("inputs", x.inputs).key("outputs").begin_array();
  for (auto& r : x.outputs) {
    if (r)
      write_result_data(w, *r);
    else
      w.null();
  }
  w.end_array().end_object();
}

/// Guest runners compute durations in floating point; a non-negative finite number is
/// rounded to whole milliseconds rather than refused.
uint64_t duration_of(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return 0;
  auto at = o.at(key);
  if (v->IsDouble()) {
    auto d = codec::as_double(*v, at);
    if (d < 0 || d >= 18446744073709551616.0)
      codec::raise(at, "out of range (expected a non-negative number of milliseconds)");
    return static_cast<uint64_t>(std::round(d));
  }
  return codec::as_uint(*v, at);
}

/// A required id string within frame_caps.
std::string capped_id(const object_view& o, std::string_view key) {
  auto s = o.str(key);
  if (s.size() > frame_caps::id_bytes)
    codec::raise(o.at(key), std::to_string(s.size()) + " bytes exceeds the limit of " +
                                std::to_string(frame_caps::id_bytes));
  return s;
}

/// A required object member, kept canonical.
raw_json object_member(const object_view& o, std::string_view key) {
  auto at = o.at(key);
  auto& v = o.need(key);
  codec::expect_object(v, at);
  return codec::canonical(v, at);
}

/// An optional object member (absent or null → empty), kept canonical.
raw_json opt_object_member(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return {};
  auto at = o.at(key);
  codec::expect_object(*v, at);
  return codec::canonical(*v, at);
}

/// A token's `data`: Langflow's on_token payload `{chunk, id}` (other keys kept).
raw_json token_data(const object_view& o) {
  object_view d{o.need("data"), o.at("data")};
  d.str("chunk");
  if (d.find("id") != nullptr) capped_id(d, "id");
  return codec::canonical(o.need("data"), o.at("data"));
}

/// A step's `types`: `{output name: class name}`.
raw_json types_of(const object_view& ev) {
  auto v = ev.find("types");
  if (v == nullptr) return {};
  auto at = ev.at("types");
  codec::expect_object(*v, at);
  if (v->MemberCount() > frame_caps::types)
    codec::raise(at, std::to_string(v->MemberCount()) + " entries exceeds the limit of " +
                         std::to_string(frame_caps::types));
  for (auto& m : v->GetObject()) {
    auto mat = at.field({m.name.GetString(), m.name.GetStringLength()});
    if (codec::as_string(m.value, mat).size() > frame_caps::type_name_bytes)
      codec::raise(mat, "a class name longer than " +
                            std::to_string(frame_caps::type_name_bytes) + " bytes");
  }
  return codec::canonical(*v, at);
}

/// Sets one of the extras, allocating them only for a value that is there.
void put(shared_extras& x, raw_json run_extras::*field, raw_json v) {
  if (!v.empty()) x.edit().*field = std::move(v);
}

guest_frame stdout_frame(std::string_view line) {
  guest_frame f;
  f.type = guest_frame::kind::stdout_line;
  f.line = codec::sanitize_utf8(line);
  return f;
}

} // namespace

void codec::write_run_outputs_list(json_writer& w, std::string_view key,
                                   const std::vector<run_outputs>& xs) {
  w.key(key).begin_array();
  for (auto& x : xs)
    write_run_outputs(w, x);
  w.end_array();
}

// -- guest frames -----------------------------------------------------------------------

result<guest_frame> decode_frame(std::string_view line, const decode_limits& limits) {
  if (line.size() > limits.max_bytes)
    return fail(ec::bad_request, "document: frame too large (" + std::to_string(line.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_bytes) + ")");
  return codec::guarded<guest_frame>([&]() -> result<guest_frame> {
    codec::document doc;
    if (codec::parse(line, limits, doc) || !doc.IsObject()) return stdout_frame(line);
    const value& root = doc;
    path p;
    object_view o{root, p};
    auto t = o.raw("t");
    if (t == nullptr || !t->IsString()) return stdout_frame(line);
    std::string_view type{t->GetString(), t->GetStringLength()};
    guest_frame f;
    if (type == "note") {
      f.type = guest_frame::kind::note;
      f.line = codec::canonical(root, p).text;
      if (auto ex = o.raw("executor"); ex != nullptr && ex->IsString())
        f.executor.assign(ex->GetString(), ex->GetStringLength());
    } else if (type == "vertex_start") {
      f.type = guest_frame::kind::vertex_start;
      f.id = o.str("id");
      f.name = o.str_or("name", "");
    } else if (type == "step") {
      object_view ev{o.need("event"), o.at("event")};
      auto event_type = ev.str("type");
      if (event_type != "vertex") {
        // A step kind this host does not know yet is informational, not an error.
        f.type = guest_frame::kind::note;
        f.line = codec::canonical(root, p).text;
        return f;
      }
      f.type = guest_frame::kind::step;
      f.id = ev.str("id");
      f.name = ev.str_or("name", "");
      f.valid = ev.boolean_or("valid", false);
      f.duration_ms = duration_of(ev, "duration_ms");
      f.vertex_outputs = ev.raw_or_empty("outputs");
      f.logs = ev.str_or("logs", "");
      f.error = ev.str_or("error", "");
      put(f.extras, &run_extras::result, opt_object_member(ev, "result"));
      put(f.extras, &run_extras::types, types_of(ev));
    } else if (type == "token") {
      f.type = guest_frame::kind::token;
      f.id = capped_id(o, "id");
      put(f.extras, &run_extras::data, token_data(o));
    } else if (type == "message") {
      f.type = guest_frame::kind::message;
      f.id = capped_id(o, "id");
      put(f.extras, &run_extras::data, object_member(o, "data"));
    } else if (type == "state") {
      f.type = guest_frame::kind::state;
      put(f.extras, &run_extras::context, object_member(o, "context"));
    } else if (type == "outputs") {
      f.type = guest_frame::kind::outputs;
      f.run_outputs_list = run_outputs_list_of(o, "run_outputs");
    } else if (type == "done") {
      f.type = guest_frame::kind::done;
    } else if (type == "fatal") {
      f.type = guest_frame::kind::fatal;
      f.error = o.str("error");
      f.traceback = o.str_or("traceback", "");
      f.code = o.str_or("code", "");
    } else if (type == "stdout") {
      f.type = guest_frame::kind::stdout_line;
      f.line = o.str("line");
    } else {
      return stdout_frame(line);
    }
    return f;
  });
}

std::string encode(const guest_frame& x) {
  using kind = guest_frame::kind;
  if (x.type == kind::note && !x.line.empty()) return x.line;
  json_writer w;
  w.begin_object();
  switch (x.type) {
  case kind::note:
    w.field("t", "note");
    break;
  case kind::vertex_start:
    w.field("t", "vertex_start").field("id", x.id).field("name", x.name);
    break;
  case kind::step:
    w.field("t", "step")
        .key("event")
        .begin_object()
        .field("type", "vertex")
        .field("id", x.id)
        .field("name", x.name)
        .field("valid", x.valid)
        .field("duration_ms", x.duration_ms)
        .raw_field_if("outputs", x.vertex_outputs)
        .field("logs", x.logs);
    if (!x.error.empty()) w.field("error", x.error);
    w.raw_field_if("result", x.result()).raw_field_if("types", x.types()).end_object();
    break;
  case kind::token:
    w.field("t", "token").field("id", x.id).field("data", x.data());
    break;
  case kind::message:
    w.field("t", "message").field("id", x.id).field("data", x.data());
    break;
  case kind::state:
    w.field("t", "state").field("context", x.context());
    break;
  case kind::outputs:
    w.field("t", "outputs");
    codec::write_run_outputs_list(w, "run_outputs", x.run_outputs_list);
    break;
  case kind::done:
    w.field("t", "done");
    break;
  case kind::fatal:
    w.field("t", "fatal").field("error", x.error).field("traceback", x.traceback);
    if (!x.code.empty()) w.field("code", x.code);
    break;
  case kind::stdout_line:
    w.field("t", "stdout").field("line", x.line);
    break;
  }
  w.end_object();
  return w.take();
}

// -- run events -------------------------------------------------------------------------

template<>
result<run_event> decode<run_event>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<run_event>(text, limits, [](const value& v, const path& p) {
    using kind = run_event::kind;
    object_view o{v, p};
    run_event x;
    x.run_id = o.str("run_id");
    x.seq = o.uint("seq");
    auto type = o.str("type");
    size_t i = 0;
    while (i < event_names.size() && event_names[i] != type)
      ++i;
    if (i == event_names.size())
      codec::raise(o.at("type"), "unknown event type " + quote_json(type));
    x.type = static_cast<kind>(i);
    switch (x.type) {
    case kind::vertex_started:
      x.id = o.str("id");
      x.name = o.str_or("name", "");
      break;
    case kind::vertex_built:
      x.id = o.str("id");
      x.name = o.str_or("name", "");
      x.valid = o.boolean_or("valid", false);
      x.duration_ms = o.uint_or("duration_ms", 0);
      x.outputs = o.raw_or_empty("outputs");
      x.logs = o.str_or("logs", "");
      put(x.extras, &run_extras::result, opt_object_member(o, "result"));
      put(x.extras, &run_extras::types, opt_object_member(o, "types"));
      break;
    case kind::token:
    case kind::message:
      x.id = o.str("id");
      put(x.extras, &run_extras::data, object_member(o, "data"));
      break;
    case kind::vertex_failed:
      x.id = o.str("id");
      x.name = o.str_or("name", "");
      x.message = o.str_or("error", "");
      break;
    case kind::stdout_line:
      x.line = o.str("line");
      break;
    case kind::complete:
      x.run_outputs_list = run_outputs_list_of(o, "outputs");
      put(x.extras, &run_extras::context, opt_object_member(o, "context"));
      break;
    case kind::error: {
      auto code = o.str("code");
      auto c = ec_from_string(code);
      if (!c) codec::raise(o.at("code"), "unknown error code " + quote_json(code));
      x.code = *c;
      x.message = o.str_or("message", "");
      break;
    }
    }
    if (x.terminal()) {
      x.executor = o.str_or("executor", "");
      x.failed = codec::strings_of(o, "failed", false);
      x.truncated = codec::truncated_of(o);
    }
    return result<run_event>{std::move(x)};
  });
}

std::string encode(const run_event& x) {
  using kind = run_event::kind;
  json_writer w;
  auto i = static_cast<size_t>(x.type);
  w.begin_object()
      .field("run_id", x.run_id)
      .field("seq", x.seq)
      .field("type", i < event_names.size() ? event_names[i] : std::string_view{"error"});
  switch (x.type) {
  case kind::vertex_started:
    w.field("id", x.id).field("name", x.name);
    break;
  case kind::vertex_built:
    w.field("id", x.id)
        .field("name", x.name)
        .field("valid", x.valid)
        .field("duration_ms", x.duration_ms)
        .raw_field_if("outputs", x.outputs)
        .field("logs", x.logs)
        .raw_field_if("result", x.result())
        .raw_field_if("types", x.types());
    break;
  case kind::token:
  case kind::message:
    w.field("id", x.id).field("data", x.data());
    break;
  case kind::vertex_failed:
    w.field("id", x.id).field("name", x.name).field("error", x.message);
    break;
  case kind::stdout_line:
    w.field("line", x.line);
    break;
  case kind::complete:
    codec::write_run_outputs_list(w, "outputs", x.run_outputs_list);
    w.raw_field_if("context", x.context());
    break;
  case kind::error:
    w.field("code", to_string(x.code)).field("message", x.message);
    break;
  }
  if (x.terminal()) {
    if (!x.executor.empty()) w.field("executor", x.executor);
    if (!x.failed.empty()) w.field("failed", x.failed);
    codec::write_truncated(w, x.truncated);
  }
  w.end_object();
  return w.take();
}

namespace {

void scrub_result_data(result_data& r, const secret_scrubber& s) {
  for (auto* j : {&r.results, &r.artifacts, &r.outputs, &r.logs, &r.messages})
    s.scrub_json(*j);
  if (r.duration) s.scrub(*r.duration);
  s.scrub(r.component_display_name);
  s.scrub(r.component_id);
}

} // namespace

void scrub(run_event& e, const secret_scrubber& s) {
  if (s.empty()) return;
  for (auto* text : {&e.id, &e.name, &e.logs, &e.line, &e.message})
    s.scrub(*text);
  for (auto& id : e.failed)
    s.scrub(id);
  s.scrub_json(e.outputs);
  if (!e.extras.empty()) {
    auto& x = e.extras.edit();
    for (auto* j : {&x.result, &x.types, &x.data, &x.context})
      s.scrub_json(*j);
  }
  for (auto& ro : e.run_outputs_list) {
    s.scrub_json(ro.inputs);
    for (auto& r : ro.outputs)
      if (r) scrub_result_data(*r, s);
  }
}

namespace {

/// A token's `data.chunk`, if it is a string.
std::optional<std::string> token_chunk(const raw_json& data) {
  if (data.text.empty() || data.text[0] != '{') return std::nullopt;
  auto r = codec::decode_with<std::optional<std::string>>(
      data.text, {}, [](const value& v, const path& p) {
        object_view o{v, p};
        std::optional<std::string> out;
        if (auto c = o.find("chunk"); c != nullptr && c->IsString())
          out = codec::as_string(*c, o.at("chunk"));
        return result<std::optional<std::string>>{std::move(out)};
      });
  return r ? std::move(*r) : std::nullopt;
}

/// `data` with its `chunk` replaced (its other members kept, in order).
raw_json with_chunk(const raw_json& data, std::string_view chunk) {
  auto r = codec::decode_with<raw_json>(data.text, {}, [&](const value& v, const path& p) {
    json_writer w;
    w.begin_object();
    for (auto& m : v.GetObject()) {
      std::string_view key{m.name.GetString(), m.name.GetStringLength()};
      w.document_key(key);
      if (key == "chunk")
        w.str(chunk);
      else
        w.canonical(m.value, p.field(key));
    }
    w.end_object();
    return result<raw_json>{raw_json{w.take()}};
  });
  return r ? std::move(*r) : data;
}

} // namespace

void event_scrubber::flush(std::vector<run_event>& out) {
  if (tail_.empty()) return;
  auto e = std::move(held_);
  e.extras.edit().data = with_chunk(e.data(), tail_);
  tail_.clear();
  scrub(e, secrets_);
  out.push_back(std::move(e));
}

void event_scrubber::feed(run_event e, std::vector<run_event>& out) {
  if (secrets_.empty()) {
    out.push_back(std::move(e));
    return;
  }
  auto chunk = e.type == run_event::kind::token ? token_chunk(e.data()) : std::nullopt;
  // Another stream, or no stream at all: what was held goes first, as it was.
  if (!chunk || e.id != held_.id) flush(out);
  if (!chunk) {
    scrub(e, secrets_);
    out.push_back(std::move(e));
    return;
  }
  auto text = std::move(tail_) + *chunk;
  tail_.clear();
  secrets_.scrub(text);
  auto keep = secrets_.unfinished_tail(text);
  if (keep > 0) {
    tail_ = text.substr(text.size() - keep);
    text.resize(text.size() - keep);
    held_ = e; // the next chunk, or the flush, is sent with this token's id and data
  }
  if (text.empty()) return; // all of it held
  e.extras.edit().data = with_chunk(e.data(), text);
  scrub(e, secrets_); // the data's other members, the id
  out.push_back(std::move(e));
}

std::string encode_run_body(const run_event& terminal,
                            const std::vector<failed_vertex>& failed) {
  json_writer w;
  w.begin_object();
  if (terminal.type == run_event::kind::error) {
    w.key("error")
        .begin_object()
        .field("code", to_string(terminal.code))
        .field("message", terminal.message)
        .end_object();
  } else {
    codec::write_run_outputs_list(w, "outputs", terminal.run_outputs_list);
  }
  if (!terminal.executor.empty()) w.field("executor", terminal.executor);
  if (!failed.empty()) {
    w.key("failed").begin_array();
    for (auto& f : failed)
      w.begin_object()
          .field("id", f.id)
          .field("name", f.name)
          .field("error", f.error)
          .end_object();
    w.end_array();
  }
  w.end_object();
  return w.take();
}

std::string encode(const std::vector<run_outputs>& x) {
  json_writer w;
  w.begin_object();
  codec::write_run_outputs_list(w, "outputs", x);
  w.end_object();
  return w.take();
}

result<std::vector<run_outputs>> decode_run_outputs(std::string_view text,
                                                    const decode_limits& limits) {
  using list = std::vector<run_outputs>;
  return codec::decode_with<list>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    return result<list>{run_outputs_list_of(o, "outputs")};
  });
}

// -- sandbox backend --------------------------------------------------------------------

template<>
result<sandbox_result> decode<sandbox_result>(std::string_view text,
                                              const decode_limits& limits) {
  return codec::decode_with<sandbox_result>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    sandbox_result x;
    x.stdout_text = o.str_or("stdout", "");
    x.stderr_text = o.str_or("stderr", "");
    x.exit_code = static_cast<int32_t>(o.integer("exit_code", INT32_MIN, INT32_MAX));
    x.execution_time_ms = o.uint_or("execution_time_ms", 0);
    x.truncated = codec::truncated_of(o);
    return result<sandbox_result>{std::move(x)};
  });
}

std::string encode(const sandbox_result& x) {
  json_writer w;
  w.begin_object()
      .field("stdout", x.stdout_text)
      .field("stderr", x.stderr_text)
      .field("exit_code", x.exit_code)
      .field("execution_time_ms", x.execution_time_ms);
  codec::write_truncated(w, x.truncated);
  w.end_object();
  return w.take();
}

} // namespace guestflow
