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
      .field("state", x.warm ? "warm" : "active")
      .field("reused", x.reused);
  w.key("sandbox")
      .begin_object()
      .field("id", x.guest_id)
      .field("name", x.session_id)
      .field("image", x.image)
      .field("allow_network", x.allow_network)
      .end_object();
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

} // namespace guestflow
