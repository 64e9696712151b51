#include "messages/base64.hpp"
#include "messages/bridge.hpp"
#include "messages/json_codec.hpp"

namespace guestflow {

namespace {

using codec::json_writer;
using codec::object_view;
using codec::path;
using codec::value;

constexpr uint64_t max_timeout_seconds = 86'400;
constexpr uint64_t max_memory_mb = uint64_t{1} << 20; ///< 1 TiB: past any shape

std::optional<uint32_t> opt_timeout(const object_view& o) {
  auto v = o.find("timeout_seconds");
  if (v == nullptr || v->IsNull()) return std::nullopt;
  auto at = o.at("timeout_seconds");
  auto secs = codec::as_uint(*v, at);
  if (secs == 0 || secs > max_timeout_seconds)
    codec::raise(at, std::to_string(secs) + " out of range (expected 1..86400)");
  return static_cast<uint32_t>(secs);
}

std::optional<uint64_t> opt_memory(const object_view& o) {
  auto v = o.find("memory_mb");
  if (v == nullptr || v->IsNull()) return std::nullopt;
  auto at = o.at("memory_mb");
  auto mb = codec::as_uint(*v, at);
  if (mb == 0 || mb > max_memory_mb)
    codec::raise(at, std::to_string(mb) + " out of range (expected 1..1048576)");
  return mb;
}

std::optional<bool> opt_bool(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr || v->IsNull()) return std::nullopt;
  return codec::as_bool(*v, o.at(key));
}

/// A required, non-empty string without NUL.
std::string nonempty(const object_view& o, std::string_view key) {
  auto s = o.str(key);
  if (s.empty()) codec::raise(o.at(key), "must not be empty");
  codec::no_nul(s, o.at(key));
  return s;
}

void write_files(json_writer& w, const returned_files& f) {
  w.key("files").begin_array();
  for (auto& file : f.files)
    w.begin_object()
        .field("path", file.path)
        .field("size", file.size)
        .field("content_base64", base64_encode(file.bytes))
        .end_object();
  w.end_array();
  w.key("dropped").begin_array();
  for (auto& d : f.dropped)
    w.begin_object().field("path", d.path).field("reason", d.reason).end_object();
  w.end_array();
  if (f.error)
    w.key("files_error")
        .begin_object()
        .field("code", to_string(f.error->code))
        .field("message", f.error->message)
        .end_object();
}

/// `{"<key>":<value>,` + the rest of `object` (which must be a non-empty JSON object).
std::string prepend_field(std::string_view key, std::string_view value_json,
                          std::string_view object) {
  std::string out = "{" + quote_json(key) + ":" + std::string{value_json};
  if (object.size() > 2) out += ",";
  out.append(object.substr(1));
  return out;
}

} // namespace

template<>
result<sandbox_call> decode<sandbox_call>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<sandbox_call>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    sandbox_call x;
    x.code = o.str("code");
    codec::no_nul(x.code, o.at("code"));
    x.env = codec::env_of(o, "env");
    x.timeout_seconds = opt_timeout(o);
    x.memory_mb = opt_memory(o);
    x.allow_network = opt_bool(o, "allow_network");
    if (auto d = o.find("allowed_domains"); d != nullptr && !d->IsNull())
      x.allowed_domains = codec::strings_of(o, "allowed_domains", true);
    x.isolation = o.opt_str("isolation");
    return result<sandbox_call>{std::move(x)};
  });
}

template<>
result<component_call> decode<component_call>(std::string_view text,
                                              const decode_limits& limits) {
  return codec::decode_with<component_call>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    component_call x;
    x.flow_id = nonempty(o, "flow_id");
    x.component_id = nonempty(o, "component_id");
    auto reuse = o.str_or("reuse", "none");
    if (reuse != "flow" && reuse != "none")
      codec::raise(o.at("reuse"), "expected \"flow\" or \"none\", got \"" + reuse + "\"");
    x.reuse = reuse == "flow";
    x.allow_network = opt_bool(o, "allow_network");
    x.timeout_seconds = opt_timeout(o);
    x.memory_mb = opt_memory(o);
    x.return_files = o.boolean_or("return_files", false);
    auto has_program = o.find("program") != nullptr;
    auto has_cmd = o.find("cmd") != nullptr;
    if (has_program == has_cmd)
      codec::raise(p, "exactly one of \"program\" and \"cmd\" is required");
    if (has_program) {
      x.program = o.str("program");
      codec::no_nul(*x.program, o.at("program"));
      if (o.find("args") != nullptr) codec::raise(o.at("args"), "only allowed with \"cmd\"");
    } else {
      x.argv.push_back(nonempty(o, "cmd"));
      auto args = codec::strings_of(o, "args", true);
      x.argv.insert(x.argv.end(), args.begin(), args.end());
    }
    return result<component_call>{std::move(x)};
  });
}

std::string encode(const component_answer& x) {
  json_writer w;
  w.begin_object()
      .field("stdout", x.result.stdout_text)
      .field("stderr", x.result.stderr_text)
      .field("exit_code", x.result.exit_code)
      .field("execution_time_ms", x.result.execution_time_ms)
      .field("outcome", x.outcome ? to_string(*x.outcome) : std::string_view{"ok"})
      .field("guest", x.guest)
      .field("reusable", x.reusable)
      .field("reused", x.reused);
  codec::write_truncated(w, x.result.truncated);
  if (x.files) write_files(w, *x.files);
  w.end_object();
  return w.take();
}

std::string encode_error(const failure& f, std::string_view run_id) {
  json_writer w;
  w.begin_object();
  if (!run_id.empty()) w.field("run_id", run_id);
  w.key("error")
      .begin_object()
      .field("code", to_string(f.code))
      .field("message", f.message)
      .end_object()
      .end_object();
  return w.take();
}

std::string encode_capabilities(const capabilities& caps, std::string_view provider) {
  return prepend_field("provider", quote_json(provider), encode(caps));
}

std::string encode_run_answer(std::string_view run_id, const run_event& complete) {
  json_writer w;
  w.begin_object().field("run_id", run_id);
  codec::write_run_outputs_list(w, "outputs", complete.run_outputs_list);
  if (!complete.executor.empty()) w.field("executor", complete.executor);
  w.field("ok", complete.failed.empty());
  if (!complete.failed.empty()) w.field("failed", complete.failed);
  w.end_object();
  return w.take();
}

std::string encode_cancel_answer(std::string_view run_id, bool cancelled) {
  json_writer w;
  w.begin_object().field("run_id", run_id).field("cancelled", cancelled).end_object();
  return w.take();
}

} // namespace guestflow
