#include "messages/image.hpp"
#include "messages/json_codec.hpp"

#include <algorithm>

namespace guestflow {
namespace {

constexpr size_t max_name_length = 64;
constexpr size_t max_host_path = 4096;

bool name_char(char c, bool first) {
  if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) return true;
  return !first && (c == '.' || c == '_' || c == ':' || c == '-');
}

std::string checked_name(const object_view& o, std::string_view key) {
  auto name = o.str(key);
  if (auto problem = image_name_problem(name); !problem.empty())
    codec::raise(o.at(key), problem);
  return name;
}

std::optional<std::string> host_path(const object_view& o, std::string_view key) {
  auto p = o.opt_str(key);
  if (!p) return p;
  auto at = o.at(key);
  codec::no_nul(*p, at);
  if (p->empty() || p->front() != '/')
    codec::raise(at,
                 "must be an absolute path on the control plane's host, got " + quote_json(*p));
  if (p->size() > max_host_path)
    codec::raise(at, "longer than " + std::to_string(max_host_path) + " bytes");
  return p;
}

image_info info_of(const value& v, const path& p) {
  object_view o{v, p};
  image_info x;
  x.name = o.str("name");
  x.kind = o.str("kind");
  x.source = o.str_or("source", "");
  x.size_bytes = o.uint_or("size_bytes", 0);
  x.created_at = o.str_or("created_at", "");
  x.preload = codec::strings_of(o, "preload", false);
  x.snapshot = o.boolean_or("snapshot", false);
  return x;
}

std::vector<std::string> checked_preload(const object_view& o) {
  auto list = codec::strings_of(o, "preload", false);
  auto ok = canonical_preload(list);
  if (!ok) codec::raise(o.at("preload"), ok.error().message);
  return *ok;
}

void write_info_fields(json_writer& w, const image_info& x) {
  w.field("name", x.name)
      .field("kind", x.kind)
      .field("source", x.source)
      .field("size_bytes", x.size_bytes)
      .field("created_at", x.created_at);
  if (!x.preload.empty()) w.field("preload", x.preload);
  if (x.snapshot) w.field("snapshot", true);
}

} // namespace

std::string image_name_problem(std::string_view name) {
  if (name.empty() || name.size() > max_name_length)
    return "image name must be 1-64 characters, got " + std::to_string(name.size());
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0))
      return "image name must match [a-z0-9][a-z0-9._:-]{0,63}, got " + quote_json(name);
  return {};
}

std::string preload_problem(std::string_view module) {
  if (module == preload_runner) return {};
  if (module.empty() || module.size() > 200)
    return "preload: a module name must be 1-200 characters, got " +
           std::to_string(module.size());
  bool start = true;
  for (char c : module) {
    bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool ok = start ? letter : (letter || (c >= '0' && c <= '9') || c == '.');
    if (!ok)
      return "preload: " + quote_json(module) +
             " is not a Python module name (dotted ASCII identifiers, e.g. pandas or "
             "numpy.linalg; or " +
             std::string{preload_runner} + ")";
    start = c == '.';
  }
  if (start) return "preload: " + quote_json(module) + " ends with '.'";
  return {};
}

result<std::vector<std::string>> canonical_preload(std::vector<std::string> modules) {
  if (modules.size() > max_preload_entries)
    return fail(ec::bad_request, "preload: at most " + std::to_string(max_preload_entries) +
                                     " modules, got " + std::to_string(modules.size()));
  for (const auto& m : modules)
    if (auto problem = preload_problem(m); !problem.empty())
      return fail(ec::bad_request, problem);
  std::sort(modules.begin(), modules.end());
  modules.erase(std::unique(modules.begin(), modules.end()), modules.end());
  return modules;
}

bool valid_image_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > max_name_length) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0)) return false;
  return true;
}

// -- decoders ---------------------------------------------------------------------------

template<>
result<image_info> decode<image_info>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<image_info>(text, limits, [](const value& v, const path& p) {
    return result<image_info>{info_of(v, p)};
  });
}

template<>
result<image_list> decode<image_list>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<image_list>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    auto at = o.at("data");
    auto& arr = o.need("data");
    codec::expect_array(arr, at);
    image_list x;
    size_t i = 0;
    for (auto& e : arr.GetArray())
      x.data.push_back(info_of(e, at.at(i++)));
    x.total = x.data.size();
    if (auto pg = o.find("pagination")) {
      object_view po{*pg, o.at("pagination")};
      x.total = po.uint_or("total", x.total);
    }
    return result<image_list>{std::move(x)};
  });
}

template<>
result<image_add_request> decode<image_add_request>(std::string_view text,
                                                    const decode_limits& limits) {
  return codec::decode_with<image_add_request>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    image_add_request x;
    x.name = checked_name(o, "name");
    x.rootfs = host_path(o, "rootfs");
    x.python_env = host_path(o, "python_env");
    x.preload = checked_preload(o);
    x.snapshot = o.boolean_or("snapshot", false);
    if (bool(x.rootfs) == bool(x.python_env))
      codec::raise(p, "give exactly one of rootfs (a rootfs tar or directory) and python_env "
                      "(a Python environment prefix)");
    return result<image_add_request>{std::move(x)};
  });
}

template<>
result<image_added> decode<image_added>(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<image_added>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    image_added x;
    x.image = info_of(v, p);
    x.dropped = codec::strings_of(o, "dropped", false);
    x.dropped_total = o.uint_or("dropped_total", x.dropped.size());
    return result<image_added>{std::move(x)};
  });
}

template<>
result<image_removed> decode<image_removed>(std::string_view text,
                                            const decode_limits& limits) {
  return codec::decode_with<image_removed>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    return result<image_removed>{image_removed{o.str("name")}};
  });
}

template<>
result<image_manifest> decode<image_manifest>(std::string_view text,
                                              const decode_limits& limits) {
  return codec::decode_with<image_manifest>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    image_manifest x;
    x.format = static_cast<uint32_t>(o.uint("format", UINT32_MAX));
    if (x.format != 1)
      codec::raise(o.at("format"), "unknown manifest format " + std::to_string(x.format));
    x.info = info_of(v, p);
    if (auto problem = image_name_problem(x.info.name); !problem.empty())
      codec::raise(o.at("name"), problem);
    x.info.preload = checked_preload(o);
    if (x.info.kind != image_kind_rootfs && x.info.kind != image_kind_python_env)
      codec::raise(o.at("kind"), "unknown image kind " + quote_json(x.info.kind));
    x.root_dir = o.str_or("root_dir", "");
    x.ro_binds = codec::strings_of(o, "ro_binds", true);
    for (size_t i = 0; i < x.ro_binds.size(); ++i)
      if (x.ro_binds[i].empty() || x.ro_binds[i].front() != '/')
        codec::raise(o.at("ro_binds").at(i), "must be an absolute path");
    x.path_prepend = o.str_or("path_prepend", "");
    codec::no_nul(x.path_prepend, o.at("path_prepend"));
    return result<image_manifest>{std::move(x)};
  });
}

// -- encoders ---------------------------------------------------------------------------

std::string encode(const image_info& x) {
  json_writer w;
  w.begin_object();
  write_info_fields(w, x);
  w.end_object();
  return w.take();
}

std::string encode(const image_list& x) {
  json_writer w;
  w.begin_object().key("data").begin_array();
  for (auto& i : x.data) {
    w.begin_object();
    write_info_fields(w, i);
    w.end_object();
  }
  w.end_array().key("pagination").begin_object().field("total", x.total).end_object();
  w.end_object();
  return w.take();
}

std::string encode(const image_add_request& x) {
  json_writer w;
  w.begin_object()
      .field("name", x.name)
      .opt_field("rootfs", x.rootfs)
      .opt_field("python_env", x.python_env);
  if (!x.preload.empty()) w.field("preload", x.preload);
  if (x.snapshot) w.field("snapshot", true);
  w.end_object();
  return w.take();
}

std::string encode(const image_added& x) {
  json_writer w;
  w.begin_object();
  write_info_fields(w, x.image);
  w.field("dropped", x.dropped).field("dropped_total", x.dropped_total).end_object();
  return w.take();
}

std::string encode(const image_removed& x) {
  json_writer w;
  w.begin_object().field("name", x.name).end_object();
  return w.take();
}

std::string encode(const image_manifest& x) {
  json_writer w;
  w.begin_object().field("format", x.format);
  write_info_fields(w, x.info);
  w.field("root_dir", x.root_dir)
      .field("ro_binds", x.ro_binds)
      .field("path_prepend", x.path_prepend)
      .end_object();
  return w.take();
}

} // namespace guestflow
