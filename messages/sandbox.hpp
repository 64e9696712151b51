#pragma once

#include "messages/egress.hpp"
#include "messages/json.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

/// Value types of the control-plane wire API (CreateOS v1 subset, DESIGN.md). Field names
/// match the wire exactly; timestamps are RFC 3339 UTC strings as the wire carries them.
namespace guestflow {

/// One catalog entry of `GET /v1/shapes`.
struct shape {
  std::string id; ///< "s-1vcpu-256mb"
  uint32_t vcpu = 0;
  uint64_t mem_mib = 0;
  uint64_t default_disk_mib = 0;
  friend bool operator==(const shape& a, const shape& b) {
    return a.id == b.id && a.vcpu == b.vcpu && a.mem_mib == b.mem_mib &&
           a.default_disk_mib == b.default_disk_mib;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, shape& x) {
  return f(x.id, x.vcpu, x.mem_mib, x.default_disk_mib);
}

/// `data` of `GET /v1/shapes`: `{data: [shape…], pagination: {total}}`.
struct shape_list {
  std::vector<shape> data;
  uint64_t total = 0;
  friend bool operator==(const shape_list& a, const shape_list& b) {
    return a.data == b.data && a.total == b.total;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, shape_list& x) {
  return f(x.data, x.total);
}

/// Lifecycle states of a guest as the wire names them.
enum class sandbox_status : uint8_t {
  creating,
  running,
  pausing,
  paused,
  resuming,
  error,
  destroying,
  destroyed,
  failed,
  /// Persistent guests only: every process gone, the workspace and record kept.
  stopping,
  stopped,
  starting,
};

std::string_view to_string(sandbox_status x) noexcept;
std::optional<sandbox_status> sandbox_status_from_string(std::string_view x) noexcept;

/// A bind mount a create asks for (local control plane only: CreateOS has none). Exactly one
/// source: a host directory (under the control plane's mount roots, resolved with symlinks
/// before the check) or a directory of the guest's own workspace volume (relative, made at
/// start when missing, so what the guest writes there is kept with the workspace).
struct sandbox_mount {
  std::string host_path;     ///< absolute host directory
  std::string workspace_dir; ///< or: relative to the workspace volume's root
  std::string guest_path;    ///< absolute, where the guest sees it
  bool read_only = false;
  friend bool operator==(const sandbox_mount& a, const sandbox_mount& b) {
    return a.host_path == b.host_path && a.workspace_dir == b.workspace_dir &&
           a.guest_path == b.guest_path && a.read_only == b.read_only;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_mount& x) {
  return f(x.host_path, x.workspace_dir, x.guest_path, x.read_only);
}

/// Body of `POST /v1/sandboxes`. The decoder enforces the wire rules: `shape` required,
/// `name` ≤ 22 chars of [a-z0-9-], `auto_pause_after_seconds` in 60–86400, env keys
/// non-empty without '=' or NUL, egress per `parse_egress`.
struct sandbox_create_request {
  std::string shape;
  std::optional<std::string> rootfs;
  std::optional<std::string> name;
  egress_policy egress; ///< absent / null / [] → allow_all
  std::map<std::string, std::string> envs;
  std::optional<uint32_t> auto_pause_after_seconds;
  bool ingress_enabled = false;
  /// Local control plane: the guest can be stopped (processes gone, workspace kept) and
  /// started again, and outlives a restart of its host. Absent on the wire: false.
  bool persistent = false;
  /// Persistent only: stopped after this long without exec or file access (0: never;
  /// absent: 600).
  std::optional<uint32_t> idle_ttl_seconds{};
  /// Persistent only: deleted after this long stopped (0: never; absent: 14 days).
  std::optional<uint32_t> delete_after_stop_seconds{};
  /// Local control plane: bind mounts (absent on the wire when empty).
  std::vector<sandbox_mount> mounts;
  /// Local control plane: "namespaces" | "gvisor" (capabilities' `isolations`); absent: the
  /// control plane's default. One it cannot give is refused, never replaced by another.
  std::optional<std::string> isolation{};

  friend bool operator==(const sandbox_create_request& a, const sandbox_create_request& b) {
    return a.shape == b.shape && a.rootfs == b.rootfs && a.name == b.name &&
           a.egress == b.egress && a.envs == b.envs &&
           a.auto_pause_after_seconds == b.auto_pause_after_seconds &&
           a.ingress_enabled == b.ingress_enabled && a.persistent == b.persistent &&
           a.idle_ttl_seconds == b.idle_ttl_seconds &&
           a.delete_after_stop_seconds == b.delete_after_stop_seconds && a.mounts == b.mounts &&
           a.isolation == b.isolation;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_create_request& x) {
  return f(x.shape, x.rootfs, x.name, x.egress, x.envs, x.auto_pause_after_seconds,
           x.ingress_enabled, x.persistent, x.idle_ttl_seconds, x.delete_after_stop_seconds,
           x.mounts, x.isolation);
}

/// `data` of a successful create: the guest is running when this returns.
struct sandbox_created {
  std::string id;
  std::string name;
  std::string ip;
  std::string shape;
  std::string rootfs;
  uint32_t vcpu = 0;
  uint64_t mem_mib = 0;
  uint64_t disk_mib = 0;
  uint64_t spawn_ms = 0;
  egress_policy egress;
  /// With `ingress_enabled`: the secret that opens the guest's service URLs
  /// (`X-Guestflow-Ingress-Token`); in this answer only, never in a view or a list.
  std::string ingress_secret;
  /// CreateOS with `ingress_enabled`: the guest's public URL with a literal `<port>`
  /// placeholder (absent when CreateOS knows no public domain); see createos_ingress.hpp.
  std::optional<std::string> ingress_url_template{};

  friend bool operator==(const sandbox_created& a, const sandbox_created& b) {
    return a.id == b.id && a.name == b.name && a.ip == b.ip && a.shape == b.shape &&
           a.rootfs == b.rootfs && a.vcpu == b.vcpu && a.mem_mib == b.mem_mib &&
           a.disk_mib == b.disk_mib && a.spawn_ms == b.spawn_ms && a.egress == b.egress &&
           a.ingress_secret == b.ingress_secret &&
           a.ingress_url_template == b.ingress_url_template;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_created& x) {
  return f(x.id, x.name, x.ip, x.shape, x.rootfs, x.vcpu, x.mem_mib, x.disk_mib, x.spawn_ms,
           x.egress, x.ingress_secret, x.ingress_url_template);
}

/// `GET /v1/sandboxes/{id}` (and each element of the list, and pause/resume replies).
struct sandbox_view {
  std::string id;
  std::string name;
  sandbox_status status = sandbox_status::creating;
  std::string shape;
  egress_policy egress;
  std::vector<std::string> envs; ///< names only, never values
  std::string created_at;
  std::optional<std::string> paused_at;
  std::optional<std::string> last_resumed_at;
  std::optional<uint32_t> auto_pause_after_seconds;
  bool persistent = false; ///< absent on the wire: false (CreateOS has no such guests)
  std::optional<std::string> stopped_at;   ///< RFC 3339, while stopped
  std::optional<std::string> last_used_at; ///< last exec or file access began or ended
  /// Exec and file calls the control plane serves on it right now (any client's).
  uint32_t calls_in_progress = 0;
  std::optional<uint32_t> idle_ttl_seconds;          ///< persistent only
  std::optional<uint32_t> delete_after_stop_seconds; ///< persistent only
  /// What the guest is (local control plane: "namespaces" | "gvisor"; absent: unknown).
  std::string isolation{};
  /// gVisor: how it last started: "boot", "checkpoint" (its memory from the stop) or
  /// "snapshot" (its image's); absent: not known (a namespaces guest).
  std::string started_from{};
  /// Why its checkpoint or snapshot could not be restored (it booted cold instead).
  std::optional<std::string> restore_error{};
  /// CreateOS: whether HTTP ingress is on, and the public URL with a literal `<port>`
  /// placeholder while it is (absent when CreateOS knows no public domain). The local
  /// control plane sends neither (its guests' ports go through serve's signed URLs).
  bool ingress_enabled = false;
  std::optional<std::string> ingress_url_template{};

  friend bool operator==(const sandbox_view& a, const sandbox_view& b) {
    return a.id == b.id && a.name == b.name && a.status == b.status && a.shape == b.shape &&
           a.egress == b.egress && a.envs == b.envs && a.created_at == b.created_at &&
           a.paused_at == b.paused_at && a.last_resumed_at == b.last_resumed_at &&
           a.auto_pause_after_seconds == b.auto_pause_after_seconds &&
           a.persistent == b.persistent && a.stopped_at == b.stopped_at &&
           a.last_used_at == b.last_used_at && a.calls_in_progress == b.calls_in_progress &&
           a.idle_ttl_seconds == b.idle_ttl_seconds &&
           a.delete_after_stop_seconds == b.delete_after_stop_seconds &&
           a.isolation == b.isolation && a.started_from == b.started_from &&
           a.restore_error == b.restore_error && a.ingress_enabled == b.ingress_enabled &&
           a.ingress_url_template == b.ingress_url_template;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_view& x) {
  return f(x.id, x.name, x.status, x.shape, x.egress, x.envs, x.created_at, x.paused_at,
           x.last_resumed_at, x.auto_pause_after_seconds, x.persistent, x.stopped_at,
           x.last_used_at, x.calls_in_progress, x.idle_ttl_seconds, x.delete_after_stop_seconds,
           x.isolation, x.started_from, x.restore_error, x.ingress_enabled,
           x.ingress_url_template);
}

/// `data` of `GET /v1/sandboxes`: `{data: [view…], pagination: {total}}`.
struct sandbox_list {
  std::vector<sandbox_view> data;
  uint64_t total = 0;
  friend bool operator==(const sandbox_list& a, const sandbox_list& b) {
    return a.data == b.data && a.total == b.total;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_list& x) {
  return f(x.data, x.total);
}

/// `data` of `DELETE /v1/sandboxes/{id}`.
struct sandbox_deleted {
  std::string id;
  sandbox_status status = sandbox_status::destroyed; ///< destroying | destroyed
  friend bool operator==(const sandbox_deleted& a, const sandbox_deleted& b) {
    return a.id == b.id && a.status == b.status;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_deleted& x) {
  return f(x.id, x.status);
}

/// `data` of `GET /v1/whoami`.
struct whoami {
  std::string user_id;
  uint64_t running = 0;
  uint64_t paused = 0;
  uint64_t other = 0;
  uint64_t total = 0;
  friend bool operator==(const whoami& a, const whoami& b) {
    return a.user_id == b.user_id && a.running == b.running && a.paused == b.paused &&
           a.other == b.other && a.total == b.total;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, whoami& x) {
  return f(x.user_id, x.running, x.paused, x.other, x.total);
}

/// `data` of `GET|PUT /v1/sandboxes/{id}/egress` and the PUT body: `{egress: [...]}`.
struct egress_body {
  egress_policy egress;
  friend bool operator==(const egress_body& a, const egress_body& b) {
    return a.egress == b.egress;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_body& x) {
  return f(x.egress);
}

/// Body of `POST /v1/sandboxes/{id}/exec`: a command and its arguments, no shell.
/// The decoder refuses an empty `cmd` and NUL bytes in `cmd`/`args`.
struct exec_request {
  std::string cmd;
  std::vector<std::string> args;
  friend bool operator==(const exec_request& a, const exec_request& b) {
    return a.cmd == b.cmd && a.args == b.args;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_request& x) {
  return f(x.cmd, x.args);
}

/// Which of a command's output streams were cut at a cap (wire: `"truncated": ["stdout",
/// "stderr"]`, absent when nothing was cut). A cut output must never pass for a whole one.
struct output_cut {
  bool stdout_cut = false;
  bool stderr_cut = false;
  bool any() const noexcept { return stdout_cut || stderr_cut; }
  output_cut& operator|=(const output_cut& o) noexcept {
    stdout_cut |= o.stdout_cut;
    stderr_cut |= o.stderr_cut;
    return *this;
  }
  friend bool operator==(const output_cut& a, const output_cut& b) {
    return a.stdout_cut == b.stdout_cut && a.stderr_cut == b.stderr_cut;
  }
  friend bool operator!=(const output_cut& a, const output_cut& b) { return !(a == b); }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, output_cut& x) {
  return f(x.stdout_cut, x.stderr_cut);
}

/// "stdout", "stderr" or "stdout and stderr" (for messages); empty when nothing was cut.
std::string describe(const output_cut& x);

/// `data` of a buffered exec: `{result: {stdout, stderr, exit_code, error?, truncated?,
/// oom_killed?}, exec_ms}`. Output past the server's caps is cut, `error` says so and
/// `truncated` names the streams; `oom_killed`: the guest's memory cgroup counted an OOM
/// kill during this exec (absent = false).
struct exec_result {
  std::string stdout_text; ///< wire "stdout"
  std::string stderr_text; ///< wire "stderr"
  int32_t exit_code = 0;
  std::optional<std::string> error;
  uint64_t exec_ms = 0;
  output_cut truncated{};
  bool oom_killed = false;
  friend bool operator==(const exec_result& a, const exec_result& b) {
    return a.stdout_text == b.stdout_text && a.stderr_text == b.stderr_text &&
           a.exit_code == b.exit_code && a.error == b.error && a.exec_ms == b.exec_ms &&
           a.truncated == b.truncated && a.oom_killed == b.oom_killed;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_result& x) {
  return f(x.stdout_text, x.stderr_text, x.exit_code, x.error, x.exec_ms, x.truncated,
           x.oom_killed);
}

/// One line of a streamed exec (`?stream=true`): exactly one of the five keys, or an
/// `outcome` line `{"oom_killed"?: true, "truncated"?: [...]}` (before the exit code, only
/// when there is something to say). The exit_code line may carry the same two keys.
struct exec_stream_line {
  enum class kind : uint8_t {
    stdout_chunk,
    stderr_chunk,
    error,
    exit_code,
    heartbeat,
    outcome
  };
  kind type = kind::heartbeat;
  std::string text;       ///< stdout / stderr / error payload
  int32_t exit_code = 0;  ///< when type == exit_code
  output_cut truncated{}; ///< outcome / exit_code lines
  bool oom_killed = false;
  /// exit_code line: the program's own run (exec_result's exec_ms). Absent from servers that
  /// do not measure it (CreateOS, older control planes): the runtime then uses its own clock.
  std::optional<uint64_t> exec_ms;
  friend bool operator==(const exec_stream_line& a, const exec_stream_line& b) {
    return a.type == b.type && a.text == b.text && a.exit_code == b.exit_code &&
           a.truncated == b.truncated && a.oom_killed == b.oom_killed && a.exec_ms == b.exec_ms;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_stream_line& x) {
  return f(x.type, x.text, x.exit_code, x.truncated, x.oom_killed, x.exec_ms);
}

/// `GET /v1/capabilities` (local control plane; CreateOS's are known constants).
struct capabilities {
  /// The default guest's isolation: "namespaces" | "gvisor" | "hardware-virtualized".
  std::string isolation;
  bool supports_deny_all_egress = true;
  bool supports_address_egress_rules = true;
  bool supports_domain_allowlist = false;
  bool link_local_blocked = true;
  uint32_t max_timeout_seconds = 3600;
  /// The images a create's `rootfs` may name (local control plane: `debian:12` first, then
  /// the added ones by name); empty when the control plane does not list them (CreateOS).
  std::vector<std::string> images{};
  /// The isolations a create may ask for (local control plane: "namespaces", and "gvisor"
  /// where runsc runs); empty when the control plane does not list them (CreateOS).
  std::vector<std::string> isolations{};
  friend bool operator==(const capabilities& a, const capabilities& b) {
    return a.isolation == b.isolation &&
           a.supports_deny_all_egress == b.supports_deny_all_egress &&
           a.supports_address_egress_rules == b.supports_address_egress_rules &&
           a.supports_domain_allowlist == b.supports_domain_allowlist &&
           a.link_local_blocked == b.link_local_blocked &&
           a.max_timeout_seconds == b.max_timeout_seconds && a.images == b.images &&
           a.isolations == b.isolations;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, capabilities& x) {
  return f(x.isolation, x.supports_deny_all_egress, x.supports_address_egress_rules,
           x.supports_domain_allowlist, x.link_local_blocked, x.max_timeout_seconds, x.images,
           x.isolations);
}

template<>
result<shape_list> decode<shape_list>(std::string_view, const decode_limits&);
template<>
result<sandbox_create_request> decode<sandbox_create_request>(std::string_view,
                                                              const decode_limits&);
template<>
result<sandbox_created> decode<sandbox_created>(std::string_view, const decode_limits&);
template<>
result<sandbox_view> decode<sandbox_view>(std::string_view, const decode_limits&);
template<>
result<sandbox_list> decode<sandbox_list>(std::string_view, const decode_limits&);
template<>
result<sandbox_deleted> decode<sandbox_deleted>(std::string_view, const decode_limits&);
template<>
result<whoami> decode<whoami>(std::string_view, const decode_limits&);
template<>
result<egress_body> decode<egress_body>(std::string_view, const decode_limits&);
template<>
result<exec_request> decode<exec_request>(std::string_view, const decode_limits&);
template<>
result<exec_result> decode<exec_result>(std::string_view, const decode_limits&);
template<>
result<exec_stream_line> decode<exec_stream_line>(std::string_view, const decode_limits&);
template<>
result<capabilities> decode<capabilities>(std::string_view, const decode_limits&);

/// Compact, byte-stable JSON of each type (the `data` object, not the envelope).
std::string encode(const shape_list& x);
std::string encode(const sandbox_create_request& x);
std::string encode(const sandbox_created& x);
std::string encode(const sandbox_view& x);
std::string encode(const sandbox_list& x);
std::string encode(const sandbox_deleted& x);
std::string encode(const whoami& x);
std::string encode(const egress_body& x);
std::string encode(const exec_request& x);
std::string encode(const exec_result& x);
std::string encode(const exec_stream_line& x); ///< one NDJSON line without the '\n'
std::string encode(const capabilities& x);

} // namespace guestflow
