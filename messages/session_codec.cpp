#include "messages/base64.hpp"
#include "messages/json_codec.hpp"
#include "messages/session.hpp"

namespace guestflow {

namespace {

using codec::json_writer;
using codec::object_view;
using codec::path;
using codec::value;

constexpr size_t max_key_bytes = 256;

/// user_id / thread_id: non-empty, bounded, no NUL (they are hashed into the guest name).
std::string session_key(const object_view& o, std::string_view key) {
  auto s = o.str(key);
  if (s.empty()) codec::raise(o.at(key), "must not be empty");
  if (s.size() > max_key_bytes) codec::raise(o.at(key), "longer than 256 bytes");
  codec::no_nul(s, o.at(key));
  return s;
}

/// What a POSIX shell accepts as a variable name: anything else could not be read back
/// by the command, and `env` would take a key with '=' as part of the value.
bool shell_name(std::string_view s) {
  if (s.empty()) return false;
  auto alpha = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  return true;
}

constexpr size_t max_mounts = 16;

/// An absolute path without NUL or control bytes (the control plane's record keeps lines).
std::string mount_path(const object_view& m, std::string_view key) {
  auto s = m.str(key);
  if (s.empty() || s[0] != '/') codec::raise(m.at(key), "must be an absolute path");
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) codec::raise(m.at(key), "must not contain control bytes");
  return s;
}

/// DeerFlow's `mounts` as its config has them: `[{host_path, container_path, read_only}]`.
std::vector<sandbox_mount> deerflow_mounts(const object_view& o) {
  std::vector<sandbox_mount> out;
  auto v = o.find("mounts");
  if (v == nullptr) return out;
  auto at = o.at("mounts");
  codec::expect_array(*v, at);
  if (v->Size() > max_mounts) codec::raise(at, "more than 16 mounts");
  for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
    object_view m{(*v)[i], at.at(i)};
    sandbox_mount x;
    x.host_path = mount_path(m, "host_path");
    x.guest_path = mount_path(m, "container_path");
    x.read_only = m.boolean_or("read_only", false);
    out.push_back(std::move(x));
  }
  return out;
}

/// The upper bounds of a session's own limits: a day of idling (the server's own idle
/// timeout has the same range), and what no catalog shape reaches (the session manager
/// refuses a value over the server's shapes, naming them).
constexpr uint64_t max_idle_seconds = 604'800;
constexpr uint64_t max_memory_mib = uint64_t{1} << 20;
constexpr uint64_t max_cpus = 1024;

/// An optional unsigned member in [min, max], refused naming the key and the range.
template<class T>
std::optional<T> bounded(const object_view& o, std::string_view key, uint64_t min,
                         uint64_t max) {
  if (o.find(key) == nullptr) return std::nullopt;
  auto n = o.uint(key);
  if (n < min || n > max)
    codec::raise(o.at(key), std::to_string(n) + " out of range (expected " +
                                std::to_string(min) + ".." + std::to_string(max) + ")");
  return static_cast<T>(n);
}

} // namespace

template<>
result<session_request> decode<session_request>(std::string_view text,
                                                const decode_limits& limits) {
  return codec::decode_with<session_request>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    session_request x;
    x.user_id = session_key(o, "user_id");
    x.thread_id = session_key(o, "thread_id");
    x.image = o.str_or("image", "");
    codec::no_nul(x.image, o.at("image"));
    x.allow_network = o.boolean_or("allow_network", false);
    x.mounts = deerflow_mounts(o);
    x.thread_dir = o.str_or("thread_dir", "");
    codec::no_nul(x.thread_dir, o.at("thread_dir"));
    if (!x.thread_dir.empty() && x.thread_dir[0] != '/')
      codec::raise(o.at("thread_dir"), "must be an absolute path");
    x.idle_timeout_seconds = bounded<uint32_t>(o, "idle_timeout_seconds", 0, max_idle_seconds);
    x.memory_mib = bounded<uint64_t>(o, "memory_mib", 1, max_memory_mib);
    x.cpus = bounded<uint32_t>(o, "cpus", 1, max_cpus);
    return result<session_request>{std::move(x)};
  });
}

template<>
result<session_command> decode<session_command>(std::string_view text,
                                                const decode_limits& limits) {
  return codec::decode_with<session_command>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    session_command x;
    x.command = o.str("command");
    codec::no_nul(x.command, o.at("command"));
    x.env = codec::env_of(o, "env");
    for (auto& kv : x.env)
      if (!shell_name(kv.first))
        codec::raise(o.at("env").field(kv.first),
                     "env key must match ^[A-Za-z_][A-Za-z0-9_]*$");
    if (auto cwd = o.opt_str("cwd")) {
      codec::no_nul(*cwd, o.at("cwd"));
      if (cwd->empty() || (*cwd)[0] != '/')
        codec::raise(o.at("cwd"), "must be an absolute path");
      x.cwd = std::move(*cwd);
    }
    if (o.find("timeout_seconds") != nullptr) {
      auto secs = o.uint("timeout_seconds");
      if (secs == 0 || secs > 86'400)
        codec::raise(o.at("timeout_seconds"),
                     std::to_string(secs) + " out of range (expected 1..86400)");
      x.timeout_seconds = static_cast<uint32_t>(secs);
    }
    return result<session_command>{std::move(x)};
  });
}

std::string encode(const session_info& x) {
  json_writer w;
  w.begin_object()
      .field("session_id", x.session_id)
      .field("user_id", x.user_id)
      .field("thread_id", x.thread_id)
      .field("state", x.stopped ? "stopped"
                      : x.warm  ? "warm"
                                : "active")
      .field("reused", x.reused)
      .opt_field("synced_files", x.synced_files);
  w.key("sandbox")
      .begin_object()
      .field("id", x.guest_id)
      .field("name", x.session_id)
      .field("image", x.image)
      .field("allow_network", x.allow_network)
      .end_object();
  return w.end_object().take();
}

template<>
result<port_url_request> decode<port_url_request>(std::string_view text,
                                                  const decode_limits& limits) {
  return codec::decode_with<port_url_request>(text, limits, [](const value& v, const path& p) {
    object_view o{v, p};
    port_url_request x;
    if (o.find("ttl_seconds") != nullptr) {
      auto secs = o.uint("ttl_seconds");
      if (secs == 0 || secs > 31'536'000)
        codec::raise(o.at("ttl_seconds"),
                     std::to_string(secs) + " out of range (expected 1..31536000)");
      x.ttl_seconds = static_cast<uint32_t>(secs);
    }
    return result<port_url_request>{x};
  });
}

std::string encode(const port_url& x) {
  json_writer w;
  w.begin_object().field("url", x.url).key("expires_at");
  if (x.expires_at)
    w.str(*x.expires_at);
  else
    w.null();
  return w.end_object().take();
}

std::string encode_session_deleted(std::string_view id) {
  json_writer w;
  return w.begin_object().field("session_id", id).field("deleted", true).end_object().take();
}

std::string encode(const command_outcome& x) {
  std::string out, err, both;
  for (auto& c : x.chunks) {
    (c.is_stderr ? err : out) += c.text;
    both += c.text;
  }
  json_writer w;
  return w.begin_object()
      .field("stdout", out)
      .field("stderr", err)
      .field("output", both)
      .field("exit_code", x.exit_code)
      .field("timed_out", x.timed_out)
      .field("exec_ms", x.exec_ms)
      .end_object()
      .take();
}

std::string encode_command_line(const output_chunk& x) {
  json_writer w;
  return w.begin_object().field(x.is_stderr ? "stderr" : "stdout", x.text).end_object().take();
}

std::string encode_command_end(const command_outcome& x) {
  json_writer w;
  return w.begin_object()
      .field("exit_code", x.exit_code)
      .field("timed_out", x.timed_out)
      .end_object()
      .take();
}

std::string encode_command_lines(const command_outcome& x) {
  std::string lines;
  for (auto& c : x.chunks)
    lines += encode_command_line(c) + '\n';
  return lines + encode_command_end(x) + '\n';
}

result<std::vector<listed_entry>> decode_listing(std::string_view json, bool& truncated) {
  struct listing {
    std::vector<listed_entry> entries;
    bool truncated = false;
  };
  auto r =
      codec::decode_with<listing>(json, decode_limits{}, [](const value& v, const path& p) {
        object_view o{v, p};
        listing out;
        out.truncated = o.boolean_or("truncated", false);
        auto& xs = o.need("entries");
        auto at = o.at("entries");
        codec::expect_array(xs, at);
        for (rapidjson::SizeType i = 0; i < xs.Size(); ++i) {
          object_view e{xs[i], at.at(i)};
          listed_entry x;
          if (auto b64 = e.opt_str("path_b64")) {
            auto bytes = base64_decode(*b64);
            if (!bytes) codec::raise(e.at("path_b64"), "not base64");
            x.path = std::move(*bytes);
          } else {
            x.path = e.str("path");
          }
          x.type = e.str("type");
          x.size = e.uint_or("size", 0);
          out.entries.push_back(std::move(x));
        }
        return result<listing>{std::move(out)};
      });
  if (!r) return r.error();
  truncated = r->truncated;
  return std::move(r->entries);
}

} // namespace guestflow
