#include "messages/json_codec.hpp"
#include "messages/sandbox.hpp"

#include <array>

namespace guestflow {

namespace {

constexpr std::array<std::string_view, 12> status_names{
    "creating",   "running",   "pausing", "paused",   "resuming", "error",
    "destroying", "destroyed", "failed",  "stopping", "stopped",  "starting",
};

constexpr size_t max_name_length = 22;
constexpr uint64_t min_auto_pause = 60;
constexpr uint64_t max_auto_pause = 86400;

sandbox_status decode_status(const object_view& o, std::string_view key) {
  auto at = o.at(key);
  auto s = codec::as_string(o.need(key), at);
  if (auto x = sandbox_status_from_string(s)) return *x;
  codec::raise(at, "unknown status " + quote_json(s));
}

void validate_name(const std::string& name, const path& at) {
  if (name.empty() || name.size() > max_name_length)
    codec::raise(at, "must be 1-22 characters, got " + std::to_string(name.size()));
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
      codec::raise(at, "must contain only [a-z0-9-], got " + quote_json(name));
}

std::string nul_free(const object_view& o, std::string_view key) {
  auto s = o.str(key);
  codec::no_nul(s, o.at(key));
  return s;
}

std::optional<std::string> opt_nul_free(const object_view& o, std::string_view key) {
  auto s = o.opt_str(key);
  if (s) codec::no_nul(*s, o.at(key));
  return s;
}

std::optional<uint32_t> opt_auto_pause(const object_view& o) {
  auto v = o.find("auto_pause_after_seconds");
  if (v == nullptr) return std::nullopt;
  auto at = o.at("auto_pause_after_seconds");
  auto x = codec::as_uint(*v, at);
  if (x < min_auto_pause || x > max_auto_pause)
    codec::raise(at, std::to_string(x) + " out of range (expected 60..86400)");
  return static_cast<uint32_t>(x);
}

constexpr size_t max_mounts = 32;

/// `mounts`: `[{"host_path"|"workspace_dir", "guest_path", "read_only"?}]`. The shape only
/// (one source, absolute guest path, no NUL or control byte: the record store keeps them
/// as lines); what may be bound where is the control plane's to decide.
std::vector<sandbox_mount> mounts_of(const object_view& o) {
  std::vector<sandbox_mount> out;
  auto v = o.find("mounts");
  if (v == nullptr) return out;
  auto at = o.at("mounts");
  codec::expect_array(*v, at);
  if (v->Size() > max_mounts) codec::raise(at, "more than 32 mounts");
  auto text = [](const object_view& m, std::string_view key) {
    auto s = m.str_or(key, "");
    for (unsigned char c : s)
      if (c < 0x20 || c == 0x7f) codec::raise(m.at(key), "must not contain control bytes");
    return s;
  };
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    object_view m{(*v)[i], at.at(i)};
    sandbox_mount x;
    x.host_path = text(m, "host_path");
    x.workspace_dir = text(m, "workspace_dir");
    x.guest_path = text(m, "guest_path");
    x.read_only = m.boolean_or("read_only", false);
    if (x.host_path.empty() == x.workspace_dir.empty())
      codec::raise(m.where(), "needs exactly one of host_path and workspace_dir");
    if (x.guest_path.empty() || x.guest_path[0] != '/')
      codec::raise(m.at("guest_path"), "must be an absolute path");
    out.push_back(std::move(x));
  }
  return out;
}

void write_mounts(json_writer& w, const std::vector<sandbox_mount>& xs) {
  if (xs.empty()) return;
  w.key("mounts").begin_array();
  for (auto& x : xs) {
    w.begin_object();
    if (!x.host_path.empty()) w.field("host_path", x.host_path);
    if (!x.workspace_dir.empty()) w.field("workspace_dir", x.workspace_dir);
    w.field("guest_path", x.guest_path).field("read_only", x.read_only).end_object();
  }
  w.end_array();
}

/// A persistent guest's TTL (idle_ttl_seconds, delete_after_stop_seconds): 0 (never) to
/// UINT32_MAX seconds.
std::optional<uint32_t> opt_seconds(const object_view& o, std::string_view key) {
  auto v = o.find(key);
  if (v == nullptr) return std::nullopt;
  return static_cast<uint32_t>(codec::as_uint(*v, o.at(key), UINT32_MAX));
}

egress_policy egress_of(const object_view& o) {
  return codec::decode_egress(o.raw("egress"), o.at("egress"));
}

void write_egress(json_writer& w, const egress_policy& p) {
  w.key("egress").begin_array();
  for (auto& r : to_strings(p))
    w.str(r);
  w.end_array();
}

void write_strings(json_writer& w, std::string_view key, const std::vector<std::string>& xs) {
  w.key(key).begin_array();
  for (auto& x : xs)
    w.str(x);
  w.end_array();
}

} // namespace

namespace codec {

output_cut truncated_of(const object_view& o) {
  output_cut x;
  auto at = o.at("truncated");
  auto names = strings_of(o, "truncated", true);
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "stdout")
      x.stdout_cut = true;
    else if (names[i] == "stderr")
      x.stderr_cut = true;
    else
      raise(at.at(i), "expected \"stdout\" or \"stderr\", got " + quote_json(names[i]));
  }
  return x;
}

void write_truncated(json_writer& w, const output_cut& x) {
  if (!x.any()) return;
  w.key("truncated").begin_array();
  if (x.stdout_cut) w.str("stdout");
  if (x.stderr_cut) w.str("stderr");
  w.end_array();
}

} // namespace codec

std::string describe(const output_cut& x) {
  if (x.stdout_cut && x.stderr_cut) return "stdout and stderr";
  return x.stdout_cut ? "stdout" : x.stderr_cut ? "stderr" : "";
}

namespace {

/// Decodes `{data: [T…], pagination: {total}}`; a missing pagination counts the page.
template<class T, class F>
std::pair<std::vector<T>, uint64_t> page_of(const value& root, const path& p, F&& item) {
  object_view o{root, p};
  auto at = o.at("data");
  auto& arr = o.need("data");
  codec::expect_array(arr, at);
  std::vector<T> xs;
  size_t i = 0;
  for (auto& x : arr.GetArray())
    xs.push_back(item(x, at.at(i++)));
  uint64_t total = xs.size();
  if (auto pg = o.find("pagination")) {
    object_view po{*pg, o.at("pagination")};
    total = po.uint_or("total", total);
  }
  return {std::move(xs), total};
}

shape shape_of(const value& v, const path& p) {
  object_view o{v, p};
  shape x;
  x.id = o.str("id");
  x.vcpu = static_cast<uint32_t>(o.uint_or("vcpu", 0, UINT32_MAX));
  x.mem_mib = o.uint_or("mem_mib", 0);
  x.default_disk_mib = o.uint_or("default_disk_mib", 0);
  return x;
}

sandbox_view view_of(const value& v, const path& p) {
  object_view o{v, p};
  sandbox_view x;
  x.id = o.str("id");
  x.name = o.str_or("name", "");
  x.status = decode_status(o, "status");
  x.shape = o.str_or("shape", "");
  x.egress = egress_of(o);
  x.envs = strings_of(o, "envs", false);
  x.created_at = o.str_or("created_at", "");
  x.paused_at = o.opt_str("paused_at");
  x.last_resumed_at = o.opt_str("last_resumed_at");
  if (auto a = o.find("auto_pause_after_seconds"))
    x.auto_pause_after_seconds =
        static_cast<uint32_t>(codec::as_uint(*a, o.at("auto_pause_after_seconds"), UINT32_MAX));
  x.persistent = o.boolean_or("persistent", false);
  x.stopped_at = o.opt_str("stopped_at");
  x.last_used_at = o.opt_str("last_used_at");
  x.calls_in_progress = static_cast<uint32_t>(o.uint_or("calls_in_progress", 0, UINT32_MAX));
  x.idle_ttl_seconds = opt_seconds(o, "idle_ttl_seconds");
  x.delete_after_stop_seconds = opt_seconds(o, "delete_after_stop_seconds");
  x.isolation = o.str_or("isolation", "");
  x.started_from = o.str_or("started_from", "");
  x.restore_error = o.opt_str("restore_error");
  // CreateOS's ingress (createos_ingress.hpp): the local control plane sends neither.
  x.ingress_enabled = o.boolean_or("ingress_enabled", false);
  x.ingress_url_template = o.opt_str("ingress_url_template");
  return x;
}

void write_shape(json_writer& w, const shape& x) {
  w.begin_object()
      .field("id", x.id)
      .field("vcpu", x.vcpu)
      .field("mem_mib", x.mem_mib)
      .field("default_disk_mib", x.default_disk_mib)
      .end_object();
}

void write_view(json_writer& w, const sandbox_view& x) {
  w.begin_object()
      .field("id", x.id)
      .field("name", x.name)
      .field("status", to_string(x.status))
      .field("shape", x.shape);
  write_egress(w, x.egress);
  write_strings(w, "envs", x.envs);
  w.field("created_at", x.created_at)
      .opt_field("paused_at", x.paused_at)
      .opt_field("last_resumed_at", x.last_resumed_at)
      .opt_field("auto_pause_after_seconds", x.auto_pause_after_seconds);
  if (x.persistent)
    w.field("persistent", true)
        .opt_field("stopped_at", x.stopped_at)
        .opt_field("idle_ttl_seconds", x.idle_ttl_seconds)
        .opt_field("delete_after_stop_seconds", x.delete_after_stop_seconds);
  w.opt_field("last_used_at", x.last_used_at);
  if (x.calls_in_progress > 0) w.field("calls_in_progress", x.calls_in_progress);
  if (!x.isolation.empty()) w.field("isolation", x.isolation);
  if (!x.started_from.empty()) w.field("started_from", x.started_from);
  w.opt_field("restore_error", x.restore_error);
  if (x.ingress_enabled) w.field("ingress_enabled", true);
  w.opt_field("ingress_url_template", x.ingress_url_template);
  w.end_object();
}

template<class T, class F>
std::string encode_page(const std::vector<T>& xs, uint64_t total, F&& item) {
  json_writer w;
  w.begin_object().key("data").begin_array();
  for (auto& x : xs)
    item(w, x);
  w.end_array().key("pagination").begin_object().field("total", total).end_object();
  w.end_object();
  return w.take();
}

} // namespace

std::string_view to_string(sandbox_status x) noexcept {
  auto i = static_cast<size_t>(x);
  return i < status_names.size() ? status_names[i] : std::string_view{"unknown"};
}

std::optional<sandbox_status> sandbox_status_from_string(std::string_view x) noexcept {
  for (size_t i = 0; i < status_names.size(); ++i)
    if (status_names[i] == x) return static_cast<sandbox_status>(i);
  return std::nullopt;
}

// -- decoders ---------------------------------------------------------------------------

template<>
result<shape_list> decode<shape_list>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<shape_list>(text, limits, [](const value& v, const path& p) {
    auto [xs, total] = page_of<shape>(v, p, shape_of);
    return result<shape_list>{shape_list{std::move(xs), total}};
  });
}

template<>
result<sandbox_create_request> decode<sandbox_create_request>(std::string_view text,
                                                              const decode_limits& limits) {
  return codec::decode_with<sandbox_create_request>(
      text, limits, [](const value& v, const path& p) {
        object_view o{v, p};
        sandbox_create_request x;
        x.shape = nul_free(o, "shape");
        if (x.shape.empty()) codec::raise(o.at("shape"), "must not be empty");
        x.rootfs = opt_nul_free(o, "rootfs");
        x.name = opt_nul_free(o, "name");
        if (x.name) validate_name(*x.name, o.at("name"));
        x.egress = egress_of(o);
        x.envs = codec::env_of(o, "envs");
        x.auto_pause_after_seconds = opt_auto_pause(o);
        x.ingress_enabled = o.boolean_or("ingress_enabled", false);
        x.persistent = o.boolean_or("persistent", false);
        x.idle_ttl_seconds = opt_seconds(o, "idle_ttl_seconds");
        x.delete_after_stop_seconds = opt_seconds(o, "delete_after_stop_seconds");
        x.mounts = mounts_of(o);
        x.isolation = opt_nul_free(o, "isolation");
        return result<sandbox_create_request>{std::move(x)};
      });
}

template<>
result<sandbox_created> decode<sandbox_created>(std::string_view text,
                                                const decode_limits& limits) {
  return codec::decode_with<sandbox_created>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    sandbox_created x;
    x.id = o.str("id");
    x.name = o.str_or("name", "");
    x.ip = o.str_or("ip", "");
    x.shape = o.str_or("shape", "");
    x.rootfs = o.str_or("rootfs", "");
    x.vcpu = static_cast<uint32_t>(o.uint_or("vcpu", 0, UINT32_MAX));
    x.mem_mib = o.uint_or("mem_mib", 0);
    x.disk_mib = o.uint_or("disk_mib", 0);
    x.spawn_ms = o.uint_or("spawn_ms", 0);
    x.egress = egress_of(o);
    x.ingress_secret = o.str_or("ingress_secret", "");
    x.ingress_url_template = o.opt_str("ingress_url_template");
    return result<sandbox_created>{std::move(x)};
  });
}

template<>
result<sandbox_view> decode<sandbox_view>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<sandbox_view>(text, limits, [](const value& v, const path& p) {
    return result<sandbox_view>{view_of(v, p)};
  });
}

template<>
result<sandbox_list> decode<sandbox_list>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<sandbox_list>(text, limits, [](const value& v, const path& p) {
    auto [xs, total] = page_of<sandbox_view>(v, p, view_of);
    return result<sandbox_list>{sandbox_list{std::move(xs), total}};
  });
}

template<>
result<sandbox_deleted> decode<sandbox_deleted>(std::string_view text,
                                                const decode_limits& limits) {
  return codec::decode_with<sandbox_deleted>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    sandbox_deleted x;
    x.id = o.str("id");
    x.status = decode_status(o, "status");
    return result<sandbox_deleted>{std::move(x)};
  });
}

template<>
result<whoami> decode<whoami>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<whoami>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    whoami x;
    x.user_id = o.str("user_id");
    if (auto s = o.find("stats")) {
      object_view so{*s, o.at("stats")};
      x.running = so.uint_or("running", 0);
      x.paused = so.uint_or("paused", 0);
      x.other = so.uint_or("other", 0);
      x.total = so.uint_or("total", 0);
    }
    return result<whoami>{std::move(x)};
  });
}

template<>
result<egress_body> decode<egress_body>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<egress_body>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    return result<egress_body>{egress_body{egress_of(o)}};
  });
}

template<>
result<exec_request> decode<exec_request>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<exec_request>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    exec_request x;
    x.cmd = nul_free(o, "cmd");
    if (x.cmd.empty()) codec::raise(o.at("cmd"), "must not be empty");
    x.args = strings_of(o, "args", true);
    return result<exec_request>{std::move(x)};
  });
}

template<>
result<exec_result> decode<exec_result>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<exec_result>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    object_view r{o.need("result"), o.at("result")};
    exec_result x;
    x.stdout_text = r.str_or("stdout", "");
    x.stderr_text = r.str_or("stderr", "");
    x.exit_code = static_cast<int32_t>(r.integer("exit_code", INT32_MIN, INT32_MAX));
    x.error = r.opt_str("error");
    x.truncated = codec::truncated_of(r);
    x.oom_killed = r.boolean_or("oom_killed", false);
    x.exec_ms = o.uint_or("exec_ms", 0);
    return result<exec_result>{std::move(x)};
  });
}

template<>
result<exec_stream_line> decode<exec_stream_line>(std::string_view text,
                                                  const decode_limits& limits) {
  return codec::decode_with<exec_stream_line>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    constexpr std::array<std::string_view, 5> keys{"stdout", "stderr", "error", "exit_code",
                                                   "hb"};
    std::optional<size_t> which;
    for (size_t i = 0; i < keys.size(); ++i) {
      if (o.raw(keys[i]) == nullptr) continue;
      if (which)
        codec::raise(p, "expected exactly one of stdout, stderr, error, exit_code, hb; got " +
                            quote_json(keys[*which]) + " and " + quote_json(keys[i]));
      which = i;
    }
    exec_stream_line x;
    // oom_killed / truncated: on the exit_code line, or alone as an outcome line.
    x.truncated = codec::truncated_of(o);
    x.oom_killed = o.boolean_or("oom_killed", false);
    bool says_outcome = o.raw("truncated") != nullptr || o.raw("oom_killed") != nullptr;
    if (!which && says_outcome) {
      x.type = exec_stream_line::kind::outcome;
      return result<exec_stream_line>{std::move(x)};
    }
    if (!which) codec::raise(p, "expected exactly one of stdout, stderr, error, exit_code, hb");
    if (says_outcome && *which != 3)
      codec::raise(p, "oom_killed and truncated go with exit_code or alone, not with " +
                          quote_json(keys[*which]));
    auto key = keys[*which];
    auto& val = *o.raw(key);
    switch (*which) {
    case 0:
    case 1:
    case 2:
      x.type = *which == 0   ? exec_stream_line::kind::stdout_chunk
               : *which == 1 ? exec_stream_line::kind::stderr_chunk
                             : exec_stream_line::kind::error;
      x.text = codec::as_string(val, o.at(key));
      break;
    case 3:
      x.type = exec_stream_line::kind::exit_code;
      x.exit_code = static_cast<int32_t>(codec::as_int(val, o.at(key), INT32_MIN, INT32_MAX));
      if (o.find("exec_ms")) x.exec_ms = o.uint("exec_ms");
      break;
    default:
      x.type = exec_stream_line::kind::heartbeat;
      if (!codec::as_bool(val, o.at(key))) codec::raise(o.at(key), "expected true");
      break;
    }
    return result<exec_stream_line>{std::move(x)};
  });
}

template<>
result<capabilities> decode<capabilities>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<capabilities>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    capabilities x;
    x.isolation = o.str_or("isolation", "");
    x.supports_deny_all_egress = o.boolean_or("supports_deny_all_egress", true);
    x.supports_address_egress_rules = o.boolean_or("supports_address_egress_rules", true);
    x.supports_domain_allowlist = o.boolean_or("supports_domain_allowlist", false);
    x.link_local_blocked = o.boolean_or("link_local_blocked", true);
    x.max_timeout_seconds =
        static_cast<uint32_t>(o.uint_or("max_timeout_seconds", 3600, UINT32_MAX));
    x.images = strings_of(o, "images", true);
    x.isolations = strings_of(o, "isolations", true);
    return result<capabilities>{std::move(x)};
  });
}

// -- encoders ---------------------------------------------------------------------------

std::string encode(const shape_list& x) {
  return encode_page(x.data, x.total, write_shape);
}

std::string encode(const sandbox_create_request& x) {
  json_writer w;
  w.begin_object()
      .field("shape", x.shape)
      .opt_field("rootfs", x.rootfs)
      .opt_field("name", x.name);
  write_egress(w, x.egress);
  w.key("envs").begin_object();
  for (auto& [k, v] : x.envs)
    w.field(k, v);
  w.end_object()
      .opt_field("auto_pause_after_seconds", x.auto_pause_after_seconds)
      .field("ingress_enabled", x.ingress_enabled);
  // Only when asked for: CreateOS knows no persistent guests.
  if (x.persistent) w.field("persistent", true);
  w.opt_field("idle_ttl_seconds", x.idle_ttl_seconds)
      .opt_field("delete_after_stop_seconds", x.delete_after_stop_seconds);
  write_mounts(w, x.mounts);
  w.opt_field("isolation", x.isolation);
  w.end_object();
  return w.take();
}

std::string encode(const sandbox_created& x) {
  json_writer w;
  w.begin_object()
      .field("id", x.id)
      .field("name", x.name)
      .field("ip", x.ip)
      .field("shape", x.shape)
      .field("rootfs", x.rootfs)
      .field("vcpu", x.vcpu)
      .field("mem_mib", x.mem_mib)
      .field("disk_mib", x.disk_mib)
      .field("spawn_ms", x.spawn_ms);
  write_egress(w, x.egress);
  if (!x.ingress_secret.empty()) w.field("ingress_secret", x.ingress_secret);
  w.opt_field("ingress_url_template", x.ingress_url_template);
  w.end_object();
  return w.take();
}

std::string encode(const sandbox_view& x) {
  json_writer w;
  write_view(w, x);
  return w.take();
}

std::string encode(const sandbox_list& x) {
  return encode_page(x.data, x.total, write_view);
}

std::string encode(const sandbox_deleted& x) {
  json_writer w;
  w.begin_object().field("id", x.id).field("status", to_string(x.status)).end_object();
  return w.take();
}

std::string encode(const whoami& x) {
  json_writer w;
  w.begin_object()
      .field("user_id", x.user_id)
      .key("stats")
      .begin_object()
      .field("running", x.running)
      .field("paused", x.paused)
      .field("other", x.other)
      .field("total", x.total)
      .end_object()
      .end_object();
  return w.take();
}

std::string encode(const egress_body& x) {
  json_writer w;
  w.begin_object();
  write_egress(w, x.egress);
  w.end_object();
  return w.take();
}

std::string encode(const exec_request& x) {
  json_writer w;
  w.begin_object().field("cmd", x.cmd);
  write_strings(w, "args", x.args);
  w.end_object();
  return w.take();
}

std::string encode(const exec_result& x) {
  json_writer w;
  w.begin_object()
      .key("result")
      .begin_object()
      .field("stdout", x.stdout_text)
      .field("stderr", x.stderr_text)
      .field("exit_code", x.exit_code)
      .opt_field("error", x.error);
  codec::write_truncated(w, x.truncated);
  if (x.oom_killed) w.field("oom_killed", true);
  w.end_object().field("exec_ms", x.exec_ms).end_object();
  return w.take();
}

std::string encode(const exec_stream_line& x) {
  json_writer w;
  w.begin_object();
  switch (x.type) {
  case exec_stream_line::kind::stdout_chunk:
    w.field("stdout", x.text);
    break;
  case exec_stream_line::kind::stderr_chunk:
    w.field("stderr", x.text);
    break;
  case exec_stream_line::kind::error:
    w.field("error", x.text);
    break;
  case exec_stream_line::kind::exit_code:
    w.field("exit_code", x.exit_code);
    codec::write_truncated(w, x.truncated);
    if (x.oom_killed) w.field("oom_killed", true);
    if (x.exec_ms) w.field("exec_ms", *x.exec_ms);
    break;
  case exec_stream_line::kind::heartbeat:
    w.field("hb", true);
    break;
  case exec_stream_line::kind::outcome:
    codec::write_truncated(w, x.truncated);
    if (x.oom_killed || !x.truncated.any()) w.field("oom_killed", x.oom_killed);
    break;
  }
  w.end_object();
  return w.take();
}

std::string encode(const capabilities& x) {
  json_writer w;
  w.begin_object()
      .field("isolation", x.isolation)
      .field("supports_deny_all_egress", x.supports_deny_all_egress)
      .field("supports_address_egress_rules", x.supports_address_egress_rules)
      .field("supports_domain_allowlist", x.supports_domain_allowlist)
      .field("link_local_blocked", x.link_local_blocked)
      .field("max_timeout_seconds", x.max_timeout_seconds)
      .field("images", x.images);
  if (!x.isolations.empty()) w.field("isolations", x.isolations);
  w.end_object();
  return w.take();
}

} // namespace guestflow
