#pragma once

// Agent sessions (bridge/API.md "Sessions"): what an HTTP caller sends and gets back, and
// what the session actors pass around.

#include "messages/inspect_optional.hpp"
#include "messages/json.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// POST /v1/sessions.
struct session_request {
  std::string user_id;
  std::string thread_id;
  std::string image; ///< "" = the server's default image
  bool allow_network = false;
  /// DeerFlow's `mounts` (`host_path`, `container_path` → guest_path, `read_only`): host
  /// directories under GUESTFLOW_SESSION_MOUNT_ROOTS, part of the guest's identity.
  std::vector<sandbox_mount> mounts;
  /// DeerFlow's host directory of the thread (`…/threads/<id>/user-data`), under a mount
  /// root: its `uploads` go in on acquire, the guest's outputs come back on release. "": none.
  std::string thread_dir;
  /// DeerFlow's `idle_timeout`: seconds a released (warm) guest runs before it is stopped;
  /// 0 = only eviction stops it. Absent: GUESTFLOW_SESSION_IDLE_TIMEOUT_SECONDS.
  std::optional<uint32_t> idle_timeout_seconds;
  /// DeerFlow's `memory_mib` and `cpus`: the guest gets the smallest shape with at least
  /// this memory (MiB) and these vCPUs (part of the guest's identity, like the image).
  /// Absent: the server's shape (LANGFLOW_SANDBOX_MEMORY_MB, GUESTFLOW_SHAPE).
  std::optional<uint64_t> memory_mib;
  std::optional<uint32_t> cpus;
  friend bool operator==(const session_request& a, const session_request& b) {
    return a.user_id == b.user_id && a.thread_id == b.thread_id && a.image == b.image &&
           a.allow_network == b.allow_network && a.mounts == b.mounts &&
           a.thread_dir == b.thread_dir && a.idle_timeout_seconds == b.idle_timeout_seconds &&
           a.memory_mib == b.memory_mib && a.cpus == b.cpus;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_request& x) {
  return f(x.user_id, x.thread_id, x.image, x.allow_network, x.mounts, x.thread_dir,
           x.idle_timeout_seconds, x.memory_mib, x.cpus);
}

/// The session object of every session answer.
struct session_info {
  std::string session_id; ///< the guest name
  std::string user_id;
  std::string thread_id;
  bool warm = false;    ///< released into the warm pool (else active)
  bool stopped = false; ///< released and stopped (memory freed, files kept)
  bool reused = false;  ///< the guest existed before this call
  std::string guest_id;
  std::string image;
  bool allow_network = false;
  /// Files copied by this call: the thread's uploads in (acquire), the outputs back
  /// (release); absent from the answer when the session has no thread_dir.
  std::optional<uint64_t> synced_files;
  friend bool operator==(const session_info& a, const session_info& b) {
    return a.session_id == b.session_id && a.user_id == b.user_id &&
           a.thread_id == b.thread_id && a.warm == b.warm && a.stopped == b.stopped &&
           a.reused == b.reused && a.guest_id == b.guest_id && a.image == b.image &&
           a.allow_network == b.allow_network && a.synced_files == b.synced_files;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_info& x) {
  return f(x.session_id, x.user_id, x.thread_id, x.warm, x.stopped, x.reused, x.guest_id,
           x.image, x.allow_network, x.synced_files);
}

/// POST /v1/sessions/{id}/commands.
struct session_command {
  std::string command;
  std::map<std::string, std::string> env; ///< keys ^[A-Za-z_][A-Za-z0-9_]*$
  std::optional<std::string> cwd;         ///< absolute
  uint32_t timeout_seconds = 600;
  friend bool operator==(const session_command& a, const session_command& b) {
    return a.command == b.command && a.env == b.env && a.cwd == b.cwd &&
           a.timeout_seconds == b.timeout_seconds;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_command& x) {
  return f(x.command, x.env, x.cwd, x.timeout_seconds);
}

/// One piece of a command's output, in the order it was written.
struct output_chunk {
  bool is_stderr = false;
  std::string text;
  friend bool operator==(const output_chunk& a, const output_chunk& b) {
    return a.is_stderr == b.is_stderr && a.text == b.text;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_chunk& x) {
  return f(x.is_stderr, x.text);
}

/// A finished command: the chunks keep the interleaving that `output` (and a stream) shows.
struct command_outcome {
  std::vector<output_chunk> chunks;
  int32_t exit_code = 0; ///< −1 when timed_out
  bool timed_out = false;
  uint64_t exec_ms = 0;
  friend bool operator==(const command_outcome& a, const command_outcome& b) {
    return a.chunks == b.chunks && a.exit_code == b.exit_code && a.timed_out == b.timed_out &&
           a.exec_ms == b.exec_ms;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, command_outcome& x) {
  return f(x.chunks, x.exit_code, x.timed_out, x.exec_ms);
}

template<>
result<session_request> decode<session_request>(std::string_view, const decode_limits&);
template<>
result<session_command> decode<session_command>(std::string_view, const decode_limits&);

/// The session object.
std::string encode(const session_info& x);
/// `{"session_id", "deleted": true}`.
std::string encode_session_deleted(std::string_view id);
/// `{stdout, stderr, output, exit_code, timed_out, exec_ms}`.
std::string encode(const command_outcome& x);
/// The NDJSON of a streamed command: one `{"stdout"|"stderr": …}` line per chunk, then
/// `{"exit_code", "timed_out"}`.
std::string encode_command_lines(const command_outcome& x);
/// One line of a streamed command (without the '\n'): `{"stdout"|"stderr": text}`.
std::string encode_command_line(const output_chunk& x);
/// A streamed command's last line: `{"exit_code", "timed_out"}`.
std::string encode_command_end(const command_outcome& x);

/// POST /v1/sessions/{id}/ports/{port} (bridge/API.md, "Service URLs"): how long the URL
/// lives, 1..the server's GUESTFLOW_PORT_URL_TTL_SECONDS (absent: that).
struct port_url_request {
  std::optional<uint32_t> ttl_seconds;
};

/// Its answer: a URL that reaches the port, and when it stops working (RFC 3339; absent
/// for a URL that does not expire, as CreateOS's own).
struct port_url {
  std::string url;
  std::optional<std::string> expires_at;
};

template<>
result<port_url_request> decode<port_url_request>(std::string_view, const decode_limits&);
/// `{"url", "expires_at"}` (`expires_at` null when the URL does not expire).
std::string encode(const port_url& x);

/// One entry of the file tool's `list` answer (bridge/API.md "Files"): the exact bytes of
/// its absolute path (`path_b64` when given, else `path`), its type and size.
struct listed_entry {
  std::string path;
  std::string type; ///< file | dir | symlink | other
  uint64_t size = 0;
};

/// `{"entries": [...], "truncated"}` of the file tool's list; `truncated` set from it.
result<std::vector<listed_entry>> decode_listing(std::string_view json, bool& truncated);

} // namespace guestflow

namespace guestflow {

/// One call of the session file API (bridge/API.md "Files"), decoded from the query.
struct session_file_call {
  std::string op;   ///< read | write | download | list | glob | grep
  std::string path; ///< bytes
  std::optional<uint64_t> start_line;
  std::optional<uint64_t> end_line;
  bool append = false;
  std::string pattern; ///< glob / grep
  std::string glob;    ///< grep's filter on the path relative to the root
  bool include_dirs = false;
  bool literal = false;
  bool case_sensitive = true;
  bool ignore = true; ///< list / glob / grep skip DeerFlow's ignored names (guest tool)
  uint64_t max_depth = 2;
  uint64_t max_results = 0;
  std::string body; ///< write's bytes
  friend bool operator==(const session_file_call& a, const session_file_call& b) {
    return a.op == b.op && a.path == b.path && a.start_line == b.start_line &&
           a.end_line == b.end_line && a.append == b.append && a.pattern == b.pattern &&
           a.glob == b.glob && a.include_dirs == b.include_dirs && a.literal == b.literal &&
           a.case_sensitive == b.case_sensitive && a.ignore == b.ignore &&
           a.max_depth == b.max_depth && a.max_results == b.max_results && a.body == b.body;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_file_call& x) {
  return f(x.op, x.path, x.start_line, x.end_line, x.append, x.pattern, x.glob, x.include_dirs,
           x.literal, x.case_sensitive, x.ignore, x.max_depth, x.max_results, x.body);
}

/// The answer of a file call: a JSON document or raw bytes.
struct session_file_answer {
  std::string body;
  std::string content_type; ///< application/json | text/plain | application/octet-stream
  friend bool operator==(const session_file_answer& a, const session_file_answer& b) {
    return a.body == b.body && a.content_type == b.content_type;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_file_answer& x) {
  return f(x.body, x.content_type);
}

} // namespace guestflow
