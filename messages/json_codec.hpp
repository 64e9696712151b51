#pragma once

// Internal to messages/: the RapidJSON plumbing every codec shares. Nothing outside
// messages/ may include this header (no RapidJSON type above messages/).

#include "messages/egress.hpp"
#include "messages/json.hpp"
#include "messages/sandbox.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <string>
#include <string_view>
#include <utility>

namespace guestflow {
struct flow_graph;
struct run_outputs;
} // namespace guestflow

namespace guestflow::codec {

using value = rapidjson::Value;

/// Where a document's values live: the first 2 KB in the document itself (most parses are
/// small answers and frames, and allocate nothing for their values), then 16 KB chunks,
/// which jemalloc's thread cache serves. RapidJSON's default pool took a 64 KB chunk for
/// every parse: past that cache, so an arena lock and freshly faulted pages each time.
struct document_pool {
  static constexpr size_t inline_bytes = 2048;
  static constexpr size_t chunk_bytes = 16 * 1024 - 64; ///< with its header, in 16 KB
  alignas(16) char first[inline_bytes];
  rapidjson::MemoryPoolAllocator<> pool{first, inline_bytes, chunk_bytes};
};

/// A parsed document. parse() decodes in place (RapidJSON's in-situ mode: no allocation and
/// copy per string), in a copy of the text that the document keeps and its strings point
/// into; a document lives no longer than the decode that made it (and never moves: its
/// values point into it).
struct document : private document_pool, rapidjson::Document {
  document()
      : rapidjson::Document(&pool) {}
  document(const document&) = delete;
  document& operator=(const document&) = delete;
  std::unique_ptr<char[]> source;
};

/// Thrown inside a codec, caught at its boundary and turned into `ec::bad_request`.
struct decode_error {
  std::string message;
};

/// Where a decoder is inside a document, as a chain of stack frames (no allocation until
/// an error message needs the text). Renders as `nodes[3].data.type`; the root alone
/// renders as `document`.
struct path {
  const path* parent = nullptr;
  std::string_view key;
  size_t index = npos;

  static constexpr size_t npos = static_cast<size_t>(-1);

  path field(std::string_view k) const { return path{this, k, npos}; }
  path at(size_t i) const { return path{this, {}, i}; }
  bool is_root() const { return parent == nullptr && key.empty() && index == npos; }
  std::string str() const;
};

/// Throws `decode_error{"<path>: <what>"}`.
[[noreturn]] void raise(const path& p, std::string_view what);

/// Parses `text` into `doc` within `limits`: size and depth caps, strict UTF-8 (also for
/// escaped surrogates), numbers out of double range kept as ±inf so that the field that
/// receives one can name itself, trailing bytes other than whitespace refused, duplicate
/// object keys refused. Returns the failure instead of throwing.
std::optional<failure> parse(std::string_view text, const decode_limits& limits, document& doc);

/// True if `s` is well-formed UTF-8 (no overlongs, no surrogates, ≤ U+10FFFF).
bool valid_utf8(std::string_view s) noexcept;

/// `s` with every ill-formed UTF-8 sequence replaced by U+FFFD.
std::string sanitize_utf8(std::string_view s);

/// Writes `s` as the writer's next string (a key where one is due) into `out`, the writer's
/// buffer: byte for byte what rapidjson::Writer::String writes (UTF-8 unchecked, controls
/// escaped, `"` and `\` escaped, the rest as is), with each run that needs no escape copied
/// at once instead of a byte at a time. A flow's graph is tens of KB of strings.
void write_string(rapidjson::Writer<rapidjson::StringBuffer>& w, rapidjson::StringBuffer& out,
                  std::string_view s);

/// Canonical compact JSON of `v` (member order kept). Throws decode_error at `p` for a
/// number that does not fit a double.
raw_json canonical(const value& v, const path& p);

/// The graph at `v` (a Langflow export, bare or under `data`), validated; throws
/// decode_error naming its place under `p`. For a flow nested in a request
/// (messages/graph.cpp).
flow_graph flow_graph_of(const value& v, const path& p);

// -- typed access; each throws decode_error naming the path -------------------------------

const char* type_name(const value& v) noexcept;

void expect_object(const value& v, const path& p);
void expect_array(const value& v, const path& p);
std::string as_string(const value& v, const path& p);
bool as_bool(const value& v, const path& p);
double as_double(const value& v, const path& p);
int64_t as_int(const value& v, const path& p, int64_t min, int64_t max);
uint64_t as_uint(const value& v, const path& p, uint64_t max = UINT64_MAX);

/// Refuses NUL bytes in strings that reach argv, env, paths or names.
void no_nul(std::string_view s, const path& p);

/// A JSON object being decoded at `where`. `find` treats `null` as absent.
class object_view {
public:
  object_view(const value& v, const path& where);

  const path& where() const { return where_; }
  path at(std::string_view key) const { return where_.field(key); }

  /// The member or nullptr when absent (`null` is returned as a value).
  const value* raw(std::string_view key) const;
  /// The member or nullptr when absent or `null`.
  const value* find(std::string_view key) const;
  /// The member; throws "<path>.<key>: required" when absent or null.
  const value& need(std::string_view key) const;

  std::string str(std::string_view key) const;
  std::optional<std::string> opt_str(std::string_view key) const;
  std::string str_or(std::string_view key, std::string fallback) const;
  bool boolean_or(std::string_view key, bool fallback) const;
  uint64_t uint(std::string_view key, uint64_t max = UINT64_MAX) const;
  uint64_t uint_or(std::string_view key, uint64_t fallback, uint64_t max = UINT64_MAX) const;
  int64_t integer(std::string_view key, int64_t min, int64_t max) const;
  /// Canonical JSON of the member; empty when absent (`null` gives "null").
  raw_json raw_or_empty(std::string_view key) const;

private:
  const value& v_;
  path where_;
};

/// Runs a decoder body, turning every exception into a failure (never throws).
template<class T, class F>
result<T> guarded(F&& f) noexcept {
  try {
    return f();
  } catch (const decode_error& e) {
    return fail(ec::bad_request, e.message);
  } catch (const std::bad_alloc&) {
    return fail(ec::bad_request, "document: out of memory while decoding");
  } catch (const std::exception& e) {
    return fail(ec::bad_request, std::string{"document: "} + e.what());
  } catch (...) {
    return fail(ec::bad_request, "document: undecodable");
  }
}

/// Parses `text` and hands the root to `body(const value&, const path&)`.
template<class T, class F>
result<T> decode_with(std::string_view text, const decode_limits& limits, F&& body) noexcept {
  return guarded<T>([&]() -> result<T> {
    document doc;
    if (auto err = parse(text, limits, doc)) return std::move(*err);
    path root;
    return body(static_cast<const value&>(doc), root);
  });
}

/// Compact writer with the few shapes the encoders need. Strings are emitted as valid
/// UTF-8 whatever the input (ill-formed bytes become U+FFFD), so output always re-decodes.
class json_writer {
public:
  json_writer();

  json_writer& begin_object();
  json_writer& end_object();
  json_writer& begin_array();
  json_writer& end_array();
  json_writer& key(std::string_view k);
  json_writer& str(std::string_view s);
  json_writer& boolean(bool b);
  json_writer& u64(uint64_t x);
  json_writer& i64(int64_t x);
  json_writer& dbl(double x); ///< non-finite → null
  json_writer& null();
  json_writer& raw(const raw_json& x); ///< verbatim; empty → null
  /// `v` of a parsed document in place, byte for byte what `codec::canonical` gives (no
  /// intermediate string); throws decode_error at `p` as it does.
  json_writer& canonical(const value& v, const path& p);
  /// A key of a parsed document (valid UTF-8 already: written as is, not sanitized).
  json_writer& document_key(std::string_view k);
  /// Bytes written so far, and the text written since `from` (valid until the next write):
  /// a member's value begins one byte (the writer's ':') after its key.
  size_t size() const { return buf_.GetSize(); }
  std::string_view since(size_t from) const {
    return {buf_.GetString() + from, buf_.GetSize() - from};
  }

  template<class V>
  json_writer& field(std::string_view k, const V& v) {
    key(k);
    return put(v);
  }

  /// Writes the field only when `v` holds a value.
  template<class V>
  json_writer& opt_field(std::string_view k, const std::optional<V>& v) {
    if (v) field(k, *v);
    return *this;
  }
  json_writer& raw_field_if(std::string_view k, const raw_json& v) {
    if (!v.empty()) field(k, v);
    return *this;
  }

  json_writer& put(const std::string& s) { return str(s); }
  json_writer& put(std::string_view s) { return str(s); }
  json_writer& put(const char* s) { return str(s); }
  json_writer& put(bool b) { return boolean(b); }
  json_writer& put(const raw_json& x) { return raw(x); }
  json_writer& put(double x) { return dbl(x); }
  json_writer& put(uint64_t x) { return u64(x); }
  json_writer& put(uint32_t x) { return u64(x); }
  json_writer& put(uint16_t x) { return u64(x); }
  json_writer& put(int64_t x) { return i64(x); }
  json_writer& put(int32_t x) { return i64(x); }
  json_writer& put(const std::vector<std::string>& xs) {
    begin_array();
    for (auto& x : xs)
      str(x);
    return end_array();
  }

  std::string take();

  rapidjson::Writer<rapidjson::StringBuffer>& native() { return w_; }

private:
  rapidjson::StringBuffer buf_;
  rapidjson::Writer<rapidjson::StringBuffer> w_;
};

/// The array of strings at `o[key]` (absent → empty); with `refuse_nul`, a NUL byte in an
/// element is an error naming it.
std::vector<std::string> strings_of(const object_view& o, std::string_view key,
                                    bool refuse_nul);

/// The object `key` as environment variables (absent → empty): keys non-empty without '='
/// or NUL, values strings without NUL.
std::map<std::string, std::string> env_of(const object_view& o, std::string_view key);

/// `truncated: ["stdout"|"stderr"…]` (absent or null → nothing cut; another name refused).
output_cut truncated_of(const object_view& o);

/// Writes `truncated` only when something was cut.
void write_truncated(json_writer& w, const output_cut& x);

/// `key: [RunOutputs…]` (shared by the run and bridge codecs).
void write_run_outputs_list(json_writer& w, std::string_view key,
                            const std::vector<run_outputs>& xs);

// -- egress on the wire (shared by sandbox and egress codecs) --------------------------

/// Decodes an `egress` member value (array of strings or null) at `p`.
egress_policy decode_egress(const value* v, const path& p);

} // namespace guestflow::codec

namespace guestflow {
// The codec .cpp files all speak in these terms.
using codec::json_writer;
using codec::object_view;
using codec::path;
using codec::value;
} // namespace guestflow
