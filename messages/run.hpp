#pragma once

#include "messages/error.hpp"
#include "messages/json.hpp"
#include "messages/sandbox.hpp"
#include "messages/secret.hpp"

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace guestflow {

/// Langflow's `ResultData` (one harvested vertex); opaque parts stay canonical JSON.
struct result_data {
  raw_json results;
  raw_json artifacts;
  raw_json outputs;
  raw_json logs;
  raw_json messages;
  std::optional<double> timedelta;
  std::optional<std::string> duration;
  std::string component_display_name;
  std::string component_id;
  bool used_frozen_result = false;
  friend bool operator==(const result_data& a, const result_data& b) {
    return a.results == b.results && a.artifacts == b.artifacts && a.outputs == b.outputs &&
           a.logs == b.logs && a.messages == b.messages && a.timedelta == b.timedelta &&
           a.duration == b.duration && a.component_display_name == b.component_display_name &&
           a.component_id == b.component_id && a.used_frozen_result == b.used_frozen_result;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, result_data& x) {
  return f(x.results, x.artifacts, x.outputs, x.logs, x.messages, x.timedelta, x.duration,
           x.component_display_name, x.component_id, x.used_frozen_result);
}

/// Langflow's `RunOutputs`: `{inputs:{…}, outputs:[ResultData|null]}`.
struct run_outputs {
  raw_json inputs; ///< object
  std::vector<std::optional<result_data>> outputs;
  friend bool operator==(const run_outputs& a, const run_outputs& b) {
    return a.inputs == b.inputs && a.outputs == b.outputs;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_outputs& x) {
  return f(x.inputs, x.outputs);
}

/// The payloads a frame or event carries only now and then (a vertex's ResultData and
/// types, a token's or message's `data`, the run's context), kept out of line: a run keeps
/// every event for late joiners, and these four inline made each event's message 128
/// bytes (two allocation classes) bigger.
struct run_extras {
  raw_json result;  ///< step / vertex_built: the vertex's ResultData object
  raw_json types;   ///< step / vertex_built: `{output: class name}`
  raw_json data;    ///< token / message: the `data` object, verbatim from the guest
  raw_json context; ///< state / complete: the graph's context after the run
  friend bool operator==(const run_extras& a, const run_extras& b) {
    return a.result == b.result && a.types == b.types && a.data == b.data &&
           a.context == b.context;
  }
};

/// A run_extras that copies of a frame or event share (copy-on-write); none is allocated
/// until something is set, which most events never need.
class shared_extras {
public:
  bool empty() const noexcept { return !p_; }
  const run_extras& get() const noexcept { return p_ ? *p_ : none(); }
  /// The extras to write into: made on first use, copied first while another copy of the
  /// frame or event shares them.
  run_extras& edit() {
    if (!p_) {
      p_ = std::make_shared<run_extras>();
    } else if (p_.use_count() != 1) {
      p_ = std::make_shared<run_extras>(*p_);
    } else {
      std::atomic_thread_fence(std::memory_order_acquire); // the last other holder's reads
    }
    return *p_;
  }

  friend bool operator==(const shared_extras& a, const shared_extras& b) {
    return a.p_ == b.p_ || a.get() == b.get();
  }

  template<class Inspector>
  friend typename Inspector::result_type inspect(Inspector& f, shared_extras& x) {
    if constexpr (Inspector::reads_state) {
      auto& e = const_cast<run_extras&>(x.get()); // read only: a reading inspector
      return f(e.result, e.types, e.data, e.context);
    } else {
      auto& e = x.edit();
      return f(e.result, e.types, e.data, e.context);
    }
  }

private:
  static const run_extras& none() noexcept {
    static const run_extras x;
    return x;
  }

  std::shared_ptr<run_extras> p_; ///< written only through edit(), while unshared
};

/// Caps on what a guest's frames may carry beyond the line cap (frame_translator's
/// `max_line`): decode refuses more, naming the field.
struct frame_caps {
  static constexpr size_t id_bytes = 1024;       ///< a vertex or message id
  static constexpr size_t types = 256;           ///< step `types` entries
  static constexpr size_t type_name_bytes = 256; ///< a `types` class name
};

/// A line the guest runner printed (DESIGN.md "Guest frames"). Any line that is not a JSON
/// object with a known string `t` is user output (`stdout_line`).
struct guest_frame {
  enum class kind : uint8_t {
    note,
    vertex_start,
    step,
    outputs,
    done,
    fatal,
    stdout_line,
    token,   ///< one streamed chunk of a vertex's output
    message, ///< a message the run stored
    state,   ///< the graph's context after the run
  };
  kind type = kind::stdout_line;
  std::string id;                            ///< vertex_start / step / token / message
  std::string name;                          ///< vertex_start / step
  bool valid = false;                        ///< step
  uint64_t duration_ms = 0;                  ///< step
  raw_json vertex_outputs;                   ///< step: event.outputs
  std::string logs;                          ///< step: event.logs
  shared_extras extras;                      ///< step: result, types; token / message: data;
                                             ///< state: context
  std::vector<run_outputs> run_outputs_list; ///< outputs frame
  std::string error;                         ///< fatal; step: event.error, if any
  std::string traceback;                     ///< fatal
  /// fatal: the error name the runner gives its failure ("bad_request" for a flow its
  /// executor cannot run); empty when it gives none or one this host does not know.
  std::string code;
  std::string executor; ///< note: the runner's `executor` ("core" | "lfx"), if it names one
  std::string line;     ///< stdout_line: the raw line; note: canonical JSON of the frame
  friend bool operator==(const guest_frame& a, const guest_frame& b) {
    return a.type == b.type && a.id == b.id && a.name == b.name && a.valid == b.valid &&
           a.duration_ms == b.duration_ms && a.vertex_outputs == b.vertex_outputs &&
           a.logs == b.logs && a.extras == b.extras &&
           a.run_outputs_list == b.run_outputs_list && a.error == b.error &&
           a.traceback == b.traceback && a.code == b.code && a.executor == b.executor &&
           a.line == b.line;
  }

  const raw_json& result() const noexcept { return extras.get().result; }   ///< step
  const raw_json& types() const noexcept { return extras.get().types; }     ///< step
  const raw_json& data() const noexcept { return extras.get().data; }       ///< token / message
  const raw_json& context() const noexcept { return extras.get().context; } ///< state
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, guest_frame& x) {
  return f(x.type, x.id, x.name, x.valid, x.duration_ms, x.vertex_outputs, x.logs, x.extras,
           x.run_outputs_list, x.error, x.traceback, x.code, x.executor, x.line);
}

/// Classifies one runner line. A line that *is* a frame (known `t`) but has wrong field
/// types is `bad_request` naming the field; anything that is not a frame is stdout_line.
/// `token` needs `id` and `data: {chunk: string, id?: string}`; `message` `id` and a `data`
/// object; `state` a `context` object; a step's `result` is an object and its `types` an
/// object of class names (each within frame_caps); the JSON values are kept verbatim
/// (canonical).
result<guest_frame> decode_frame(std::string_view line, const decode_limits& limits = {});
std::string encode(const guest_frame& x);

/// A run event sent to callers (DESIGN.md "Run events"), one JSON object per line.
struct run_event {
  enum class kind : uint8_t {
    vertex_started,
    vertex_built,
    vertex_failed,
    stdout_line, ///< wire "stdout"
    complete,
    error,
    token,   ///< a streamed chunk of a vertex's output (Langflow's on_token)
    message, ///< a message the run stored (Langflow's on_message)
  };
  std::string run_id;
  uint64_t seq = 0;
  kind type = kind::stdout_line;
  std::string id;                            ///< vertex_* / token / message
  std::string name;                          ///< vertex_*
  bool valid = false;                        ///< vertex_built
  uint64_t duration_ms = 0;                  ///< vertex_built
  raw_json outputs;                          ///< vertex_built
  std::string logs;                          ///< vertex_built
  shared_extras extras;                      ///< vertex_built: result, types; token /
                                             ///< message: data; complete: context
  std::string line;                          ///< stdout
  std::vector<run_outputs> run_outputs_list; ///< complete: "outputs"
  ec code = ec::guest_failed;                ///< error: "code"
  std::string message;                       ///< error: "message"; vertex_failed: "error"
  /// complete / error: the guest executor that ran the flow ("core" | "lfx"); empty when
  /// the run ended before the runner said (wire: absent).
  std::string executor;
  /// error: the ids of the vertices that failed (or were not built because an upstream one
  /// failed), in event order; a run with one ends with `error`, never `complete`.
  std::vector<std::string> failed;
  /// complete / error: the guest's output streams cut at a cap (wire `truncated`, absent
  /// when nothing was cut): the frames past the cut were lost.
  output_cut truncated{};

  bool terminal() const noexcept { return type == kind::complete || type == kind::error; }

  const raw_json& result() const noexcept { return extras.get().result; }   ///< vertex_built
  const raw_json& types() const noexcept { return extras.get().types; }     ///< vertex_built
  const raw_json& data() const noexcept { return extras.get().data; }       ///< token / message
  const raw_json& context() const noexcept { return extras.get().context; } ///< complete

  friend bool operator==(const run_event& a, const run_event& b) {
    return a.run_id == b.run_id && a.seq == b.seq && a.type == b.type && a.id == b.id &&
           a.name == b.name && a.valid == b.valid && a.duration_ms == b.duration_ms &&
           a.outputs == b.outputs && a.logs == b.logs && a.extras == b.extras &&
           a.line == b.line && a.run_outputs_list == b.run_outputs_list && a.code == b.code &&
           a.message == b.message && a.executor == b.executor && a.failed == b.failed &&
           a.truncated == b.truncated;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, run_event& x) {
  return f(x.run_id, x.seq, x.type, x.id, x.name, x.valid, x.duration_ms, x.outputs, x.logs,
           x.extras, x.line, x.run_outputs_list, x.code, x.message, x.executor, x.failed,
           x.truncated);
}

/// `e` with every secret value of `s` replaced (messages/secret.hpp) in each field a caller
/// sees: strings as they are, JSON values inside their strings (keys too) and any number or
/// literal that holds one, so the value stays valid JSON.
void scrub(run_event& e, const secret_scrubber& s);

/// Scrubs one run's events in their order. Token events are a stream: a secret a model
/// prints comes split across chunks, so the end of a chunk that begins a secret is held
/// back and sent at the front of the stream's next chunk (or, with nothing after it, as a
/// token of its own before the next other event). The chunks' text, joined, is the
/// stream's text with each secret masked; only where a chunk ended inside a possible
/// secret do the chunks' boundaries move.
class event_scrubber {
public:
  event_scrubber() = default;
  explicit event_scrubber(secret_scrubber s)
      : secrets_(std::move(s)) {}

  bool empty() const noexcept { return secrets_.empty(); }

  /// Appends what `e` becomes to `out`: nothing (a chunk wholly held back), one event, or
  /// the held text as a token and then `e`.
  void feed(run_event e, std::vector<run_event>& out);

private:
  void flush(std::vector<run_event>& out);

  secret_scrubber secrets_;
  run_event held_;   ///< the token whose chunk's end is held (its id and data)
  std::string tail_; ///< that end; empty when nothing is held
};

/// A vertex that failed, with its error (what the CLI's `--json` body lists).
struct failed_vertex {
  std::string id;
  std::string name;
  std::string error;
};

/// The CLI's `--json` body for a run's terminal event. Completed:
/// `{"outputs":[RunOutputs…], "executor"}` (Langflow's /api/v1/run shape); a run that
/// failed (a failed vertex included): `{"error": {code, message}, "executor"?,
/// "failed"?: [{id, name, error}…]}`.
std::string encode_run_body(const run_event& terminal,
                            const std::vector<failed_vertex>& failed);

template<>
result<run_event> decode<run_event>(std::string_view, const decode_limits&);
std::string encode(const run_event& x);                ///< one NDJSON line without '\n'
std::string encode(const std::vector<run_outputs>& x); ///< `{"outputs":[…]}` (/api/v1/run body)
/// Inverse of `encode(const std::vector<run_outputs>&)`: decodes a `{"outputs":[…]}` body.
result<std::vector<run_outputs>> decode_run_outputs(std::string_view text,
                                                    const decode_limits& limits = {});

/// The sandbox-backend result (lfx `SandboxResult`).
struct sandbox_result {
  std::string stdout_text; ///< wire "stdout"
  std::string stderr_text; ///< wire "stderr"
  int32_t exit_code = 0;   ///< -1 on timeout, 137 on OOM
  uint64_t execution_time_ms = 0;
  /// Streams cut at a cap (wire `truncated`, absent when nothing was cut): the output is
  /// not the program's whole output, whatever `exit_code` says.
  output_cut truncated{};
  friend bool operator==(const sandbox_result& a, const sandbox_result& b) {
    return a.stdout_text == b.stdout_text && a.stderr_text == b.stderr_text &&
           a.exit_code == b.exit_code && a.execution_time_ms == b.execution_time_ms &&
           a.truncated == b.truncated;
  }
};

template<class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_result& x) {
  return f(x.stdout_text, x.stderr_text, x.exit_code, x.execution_time_ms, x.truncated);
}

template<>
result<sandbox_result> decode<sandbox_result>(std::string_view, const decode_limits&);
std::string encode(const sandbox_result& x);

} // namespace guestflow
