#include "messages/json.hpp"

#include "messages/json_codec.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <rapidjson/error/en.h>
#include <rapidjson/reader.h>
#include <vector>

namespace guestflow {
namespace codec {
namespace {

/// Depth beyond which even a caller-raised limit is clamped: the walkers below recurse
/// once per level, and actor threads do not have unbounded stacks.
constexpr size_t hard_max_depth = 1024;

/// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if ill-formed.
size_t utf8_sequence(std::string_view s, size_t i) noexcept {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto c = byte(i);
  if (c < 0x80) return 1;
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0)
      lo = 0xA0; // overlong
    else if (c == 0xED)
      hi = 0x9F; // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0)
      lo = 0x90; // overlong
    else if (c == 0xF4)
      hi = 0x8F; // > U+10FFFF
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < len; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  return len;
}

enum class stop_reason { none, too_deep, bad_utf8, bad_number };

/// Converts a JSON number's text. Integers that fit stay integers; anything else is a
/// double, and a magnitude beyond double range becomes ±inf (underflow becomes ±0) so
/// that the typed field receiving it can report "out of range" with its own path.
bool number_value(std::string_view t, double& d, int64_t& i, uint64_t& u, int& kind) {
  const char* b = t.data();
  const char* e = b + t.size();
  bool neg = !t.empty() && t[0] == '-';
  if (t.find_first_of(".eE") == std::string_view::npos) {
    if (neg) {
      auto r = std::from_chars(b, e, i);
      if (r.ec == std::errc{} && r.ptr == e) {
        kind = 1;
        return true;
      }
    } else {
      auto r = std::from_chars(b, e, u);
      if (r.ec == std::errc{} && r.ptr == e) {
        kind = 2;
        return true;
      }
    }
  }
  kind = 3;
  auto r = std::from_chars(b, e, d);
  if (r.ec == std::errc{} && r.ptr == e) return true;
  if (r.ec != std::errc::result_out_of_range) return false;
  // Decide overflow vs underflow from the decimal magnitude of the text.
  auto digits = t.substr(neg ? 1 : 0);
  auto epos = digits.find_first_of("eE");
  auto mantissa = digits.substr(0, epos);
  int64_t exp10 = 0;
  if (epos != std::string_view::npos) {
    auto ex = digits.substr(epos + 1);
    bool eneg = !ex.empty() && ex[0] == '-';
    if (!ex.empty() && (ex[0] == '-' || ex[0] == '+')) ex.remove_prefix(1);
    for (char c : ex) {
      exp10 = exp10 * 10 + (c - '0');
      if (exp10 > 1000000) break;
    }
    if (eneg) exp10 = -exp10;
  }
  auto dot = mantissa.find('.');
  auto int_part = mantissa.substr(0, dot);
  auto nz = int_part.find_first_not_of('0');
  int64_t magnitude;
  if (nz != std::string_view::npos) {
    magnitude = static_cast<int64_t>(int_part.size() - nz) - 1 + exp10;
  } else {
    auto frac = dot == std::string_view::npos ? std::string_view{} : mantissa.substr(dot + 1);
    auto fz = frac.find_first_not_of('0');
    magnitude = -static_cast<int64_t>(fz == std::string_view::npos ? 0 : fz) - 1 + exp10;
  }
  auto inf = std::numeric_limits<double>::infinity();
  d = magnitude > 0 ? (neg ? -inf : inf) : (neg ? -0.0 : 0.0);
  return true;
}

/// Numbers RapidJSON refused as too big, by offset (value: negative), and replaced by "0"
/// padded with spaces so that a re-parse keeps every offset; they become ±inf.
using patched_numbers = std::map<size_t, bool>;

/// At most this many re-parses to locate out-of-range numbers; past it, the document is
/// refused as a whole (a legitimate document has no such numbers at all).
constexpr size_t max_patched_numbers = 16;

/// A key's length and first and last bytes in one word: keys that differ there (nearly
/// all pairs of one object's keys) are told apart without a byte comparison.
uint32_t key_print(std::string_view k) noexcept {
  if (k.empty()) return 0;
  return static_cast<uint32_t>(k.size()) << 16 |
         static_cast<uint32_t>(static_cast<unsigned char>(k.front())) << 8 |
         static_cast<unsigned char>(k.back());
}

/// A key that occurs twice among one object's `n` keys, if any: pairwise on prints for
/// the usual few (no allocation), sorted in `scratch` beyond.
std::optional<std::string_view> duplicate_key(const std::string_view* keys, size_t n,
                                              std::vector<std::string_view>& scratch) {
  constexpr size_t pairwise_max = 32;
  if (n < 2) return std::nullopt;
  if (n <= pairwise_max) {
    uint32_t prints[pairwise_max];
    for (size_t i = 0; i < n; ++i) {
      prints[i] = key_print(keys[i]);
      for (size_t j = 0; j < i; ++j)
        if (prints[i] == prints[j] && keys[i] == keys[j]) return keys[i];
    }
    return std::nullopt;
  }
  scratch.assign(keys, keys + n);
  std::sort(scratch.begin(), scratch.end());
  auto dup = std::adjacent_find(scratch.begin(), scratch.end());
  if (dup == scratch.end()) return std::nullopt;
  return *dup;
}

/// SAX front end that feeds a GenericDocument while enforcing depth, UTF-8 and numbers.
struct sax_builder {
  sax_builder(document& d, size_t max, rapidjson::InsituStringStream& s, std::string_view t,
              const patched_numbers& p)
      : doc(d)
      , max_depth(max)
      , in(s)
      , text(t)
      , patched(p) {}

  document& doc;
  size_t max_depth;
  rapidjson::InsituStringStream& in; ///< Tell() is not const
  std::string_view text;             ///< as given: numbers are read here (see RawNumber)
  const patched_numbers& patched;
  size_t depth = 0;
  stop_reason stop = stop_reason::none;
  /// Duplicate keys are refused (two `cmd` members must not mean different things to
  /// different parsers): looked for as each object ends, among its keys (the open objects'
  /// keys are this stack); naming the object is left to a walk of the document, for the
  /// documents that have one.
  std::vector<std::string_view> keys;
  std::vector<std::string_view> scratch;
  bool duplicate = false;

  bool Null() { return doc.Null(); }
  bool Bool(bool b) { return doc.Bool(b); }
  bool Int(int x) { return doc.Int(x); }
  bool Uint(unsigned x) { return doc.Uint(x); }
  bool Int64(int64_t x) { return doc.Int64(x); }
  bool Uint64(uint64_t x) { return doc.Uint64(x); }
  bool Double(double x) { return doc.Double(x); }
  bool RawNumber(const char*, rapidjson::SizeType n, bool) {
    // RapidJSON parses a number on a local copy of the string stream and moves `in` past it
    // afterwards: here `in` still stands at the number's first byte. The number is read from
    // the text there (RapidJSON 1.1's in-situ pointer for it is off by its length).
    static_assert(rapidjson::StreamTraits<rapidjson::InsituStringStream>::copyOptimization);
    auto at = in.Tell();
    if (!patched.empty()) {
      if (auto it = patched.find(at); it != patched.end()) {
        auto inf = std::numeric_limits<double>::infinity();
        return doc.Double(it->second ? -inf : inf);
      }
    }
    if (at + n > text.size()) {
      stop = stop_reason::bad_number;
      return false;
    }
    const char* s = text.data() + at;
    double d = 0;
    int64_t i = 0;
    uint64_t u = 0;
    int kind = 0;
    if (!number_value(std::string_view{s, n}, d, i, u, kind)) {
      stop = stop_reason::bad_number;
      return false;
    }
    switch (kind) {
    case 1:
      return doc.Int64(i);
    case 2:
      return doc.Uint64(u);
    default:
      return doc.Double(d);
    }
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    if (!valid_utf8(std::string_view{s, n})) {
      stop = stop_reason::bad_utf8;
      return false;
    }
    return doc.String(s, n, copy);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    keys.emplace_back(s, n); // in the document's text: as long-lived as the document
    return String(s, n, copy);
  }
  bool StartObject() { return enter() && doc.StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth;
    auto first = keys.data() + (keys.size() - n);
    if (!duplicate && duplicate_key(first, n, scratch)) duplicate = true;
    keys.resize(keys.size() - n);
    return doc.EndObject(n);
  }
  bool StartArray() { return enter() && doc.StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth;
    return doc.EndArray(n);
  }

private:
  bool enter() {
    if (++depth > max_depth) {
      stop = stop_reason::too_deep;
      return false;
    }
    return true;
  }
};

std::optional<failure> finish(const rapidjson::ParseResult& pr, const sax_builder& sax,
                              std::string_view text, size_t parsed);

bool is_json_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

std::string_view key_of(const value& k) {
  return {k.GetString(), k.GetStringLength()};
}

/// Names the first object, in document order, with a duplicate key (the parse only saw
/// that there is one). Recursion is bounded by the depth limit.
void check_duplicates(const value& v, const path& p, std::vector<std::string_view>& keys,
                      std::vector<std::string_view>& scratch) {
  if (v.IsObject()) {
    keys.clear();
    for (auto& m : v.GetObject())
      keys.push_back(key_of(m.name));
    if (auto dup = duplicate_key(keys.data(), keys.size(), scratch))
      raise(p, "duplicate key " + quote_json(*dup));
    for (auto& m : v.GetObject())
      check_duplicates(m.value, p.field(key_of(m.name)), keys, scratch);
  } else if (v.IsArray()) {
    size_t i = 0;
    for (auto& x : v.GetArray())
      check_duplicates(x, p.at(i++), keys, scratch);
  }
}

void write_canonical(rapidjson::Writer<rapidjson::StringBuffer>& w,
                     rapidjson::StringBuffer& out, const value& v, const path& p) {
  switch (v.GetType()) {
  case rapidjson::kNullType:
    w.Null();
    break;
  case rapidjson::kFalseType:
    w.Bool(false);
    break;
  case rapidjson::kTrueType:
    w.Bool(true);
    break;
  case rapidjson::kStringType:
    write_string(w, out, {v.GetString(), v.GetStringLength()});
    break;
  case rapidjson::kNumberType:
    if (v.IsUint64())
      w.Uint64(v.GetUint64());
    else if (v.IsInt64())
      w.Int64(v.GetInt64());
    else if (!std::isfinite(v.GetDouble()))
      raise(p, "number out of range");
    else
      w.Double(v.GetDouble());
    break;
  case rapidjson::kObjectType:
    w.StartObject();
    for (auto& m : v.GetObject()) {
      write_string(w, out, key_of(m.name));
      write_canonical(w, out, m.value, p.field(key_of(m.name)));
    }
    w.EndObject();
    break;
  case rapidjson::kArrayType: {
    w.StartArray();
    size_t i = 0;
    for (auto& x : v.GetArray())
      write_canonical(w, out, x, p.at(i++));
    w.EndArray();
    break;
  }
  }
}

std::string range_text(int64_t min, uint64_t max) {
  return "out of range (expected an integer in " + std::to_string(min) + ".." +
         std::to_string(max) + ")";
}

/// Keys that render as `.key`; anything else renders as `["key"]` so that a path always
/// reads unambiguously, even for keys with dots, spaces or control bytes.
bool plain_key(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-' || c == '$'))
      return false;
  return true;
}

} // namespace

std::string path::str() const {
  if (is_root()) return "document";
  std::vector<const path*> chain;
  for (auto p = this; p != nullptr && !p->is_root(); p = p->parent)
    chain.push_back(p);
  std::string out;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    auto& seg = **it;
    if (seg.index != npos) {
      out += '[';
      out += std::to_string(seg.index);
      out += ']';
    } else if (plain_key(seg.key)) {
      if (!out.empty()) out += '.';
      out.append(seg.key.data(), seg.key.size());
    } else {
      out += '[';
      out += quote_json(seg.key);
      out += ']';
    }
  }
  return out;
}

void raise(const path& p, std::string_view what) {
  std::string msg = p.str();
  msg += ": ";
  msg.append(what.data(), what.size());
  throw decode_error{std::move(msg)};
}

namespace {

/// Whether any of the 8 bytes in `w` needs an escape in a JSON string: below 0x20, `"` or
/// `\\` (the classic has-zero-byte test on w, w ^ '"'… and has-less-than on w; exact as a
/// yes/no for the word).
bool escape_in(uint64_t w) noexcept {
  constexpr uint64_t ones = 0x0101010101010101ull;
  constexpr uint64_t highs = 0x8080808080808080ull;
  auto zero = [](uint64_t x) { return (x - ones) & ~x & highs; };
  return ((w - ones * 0x20) & ~w & highs) | zero(w ^ (ones * '"')) | zero(w ^ (ones * '\\'));
}

/// The offset of the first byte of `s` at or after `i` that needs an escape, or s.size().
size_t next_escape(std::string_view s, size_t i) noexcept {
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (escape_in(w)) break;
  }
  for (; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == '"' || c == '\\') return i;
  }
  return i;
}

} // namespace

void write_string(rapidjson::Writer<rapidjson::StringBuffer>& w, rapidjson::StringBuffer& out,
                  std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  // The writer places the separator and counts the value; the bytes go in below.
  w.RawValue("", 0, rapidjson::kStringType);
  auto i = next_escape(s, 0);
  if (i == s.size()) { // the common case: nothing to escape, one copy
    char* p = out.Push(s.size() + 2);
    p[0] = '"';
    std::memcpy(p + 1, s.data(), s.size());
    p[s.size() + 1] = '"';
    return;
  }
  out.Put('"');
  size_t run = 0; // start of the bytes not yet copied
  for (; i < s.size(); i = next_escape(s, i + 1)) {
    auto c = static_cast<unsigned char>(s[i]);
    std::memcpy(out.Push(i - run), s.data() + run, i - run);
    run = i + 1;
    char* e = out.Push(2);
    e[0] = '\\';
    switch (c) {
    case '"':
    case '\\':
      e[1] = static_cast<char>(c);
      break;
    case '\b':
      e[1] = 'b';
      break;
    case '\t':
      e[1] = 't';
      break;
    case '\n':
      e[1] = 'n';
      break;
    case '\f':
      e[1] = 'f';
      break;
    case '\r':
      e[1] = 'r';
      break;
    default: {
      e[1] = 'u';
      char* u = out.Push(4);
      u[0] = '0';
      u[1] = '0';
      u[2] = hex[c >> 4];
      u[3] = hex[c & 15];
    }
    }
  }
  std::memcpy(out.Push(s.size() - run), s.data() + run, s.size() - run);
  out.Put('"');
}

bool valid_utf8(std::string_view s) noexcept {
  for (size_t i = 0; i < s.size();) {
    // ASCII, the common case, eight bytes at a time.
    if (uint64_t w; i + 8 <= s.size()) {
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    auto n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::optional<failure> parse(std::string_view text, const decode_limits& limits,
                             document& doc) {
  if (text.size() > limits.max_bytes)
    return fail(ec::bad_request, "document: " + std::to_string(text.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(limits.max_bytes) + " bytes");
  // No kParseValidateEncodingFlag: sax_builder checks every decoded string and key with
  // valid_utf8, which is stricter (escaped surrogates too). Recursive, not iterative: the
  // sax_builder stops at max_depth (≤ 1024 levels, a few hundred KB of stack), and the
  // recursive parser costs a third less per byte.
  constexpr unsigned flags = rapidjson::kParseInsituFlag |
                             rapidjson::kParseNumbersAsStringsFlag |
                             rapidjson::kParseStopWhenDoneFlag;
  // In situ: strings decode in place in a NUL-terminated copy of the text that the
  // document keeps (numbers too big for RapidJSON are patched there), read up to the NUL
  // without a bounds check per byte. An embedded NUL ends the parse there, and the check
  // after the value refuses what follows, as for any other trailing byte. (Not
  // RAPIDJSON_SSE2: Debian's RapidJSON 1.1 then lets raw 0x1A-0x1F through in strings.)
  doc.source = std::make_unique<char[]>(text.size() + 1);
  patched_numbers patched;
  auto max_depth = std::min(limits.max_depth, hard_max_depth);
  bool duplicate = false;
  for (;;) {
    // (Again) the text as given, with every number patched so far: a parse in situ has
    // rewritten what it read.
    char* buf = doc.source.get();
    std::memcpy(buf, text.data(), text.size());
    buf[text.size()] = '\0';
    for (auto& [begin, negative] : patched) {
      auto end = text.find_first_not_of("+-0123456789.eE", begin);
      if (end == std::string_view::npos) end = text.size();
      buf[begin] = '0';
      std::fill(buf + begin + 1, buf + end, ' ');
    }
    rapidjson::InsituStringStream in{buf};
    sax_builder sax{doc, max_depth, in, text, patched};
    rapidjson::Reader reader;
    rapidjson::ParseResult pr;
    auto gen = [&](rapidjson::Document&) {
      pr = reader.Parse<flags>(in, sax);
      return !pr.IsError();
    };
    doc.Populate(gen);
    // RapidJSON refuses a number beyond double range outright; let it through as ±inf
    // so that the field receiving it reports "out of range" under its own path.
    if (pr.Code() == rapidjson::kParseErrorNumberTooBig &&
        patched.size() < max_patched_numbers && pr.Offset() < text.size()) {
      patched.emplace(pr.Offset(), text[pr.Offset()] == '-');
      continue;
    }
    if (auto err = finish(pr, sax, text, in.Tell())) return err;
    duplicate = sax.duplicate;
    break;
  }
  if (!duplicate) return std::nullopt;
  try {
    std::vector<std::string_view> keys, scratch;
    check_duplicates(doc, path{}, keys, scratch);
  } catch (const decode_error& e) {
    return fail(ec::bad_request, e.message);
  }
  return fail(ec::bad_request, "document: duplicate key"); // seen by the parse: fail closed
}

namespace {

std::optional<failure> finish(const rapidjson::ParseResult& pr, const sax_builder& sax,
                              std::string_view text, size_t parsed) {
  if (pr.IsError()) {
    auto at = " at offset " + std::to_string(pr.Offset());
    switch (sax.stop) {
    case stop_reason::too_deep:
      return fail(ec::bad_request,
                  "document: nesting deeper than " + std::to_string(sax.max_depth) + at);
    case stop_reason::bad_utf8:
      return fail(ec::bad_request, "document: invalid UTF-8 in a string" + at);
    case stop_reason::bad_number:
      return fail(ec::bad_request, "document: malformed number" + at);
    case stop_reason::none:
      break;
    }
    if (pr.Code() == rapidjson::kParseErrorStringInvalidEncoding)
      return fail(ec::bad_request, "document: invalid UTF-8 in a string" + at);
    return fail(ec::bad_request,
                "document: invalid JSON" + at + ": " + rapidjson::GetParseError_En(pr.Code()));
  }
  for (auto p = parsed; p < text.size(); ++p)
    if (!is_json_space(text[p]))
      return fail(ec::bad_request, "document: unexpected data after the JSON value at offset " +
                                       std::to_string(p));
  return std::nullopt;
}

} // namespace

raw_json canonical(const value& v, const path& p) {
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w{buf};
  write_canonical(w, buf, v, p);
  return raw_json{std::string{buf.GetString(), buf.GetSize()}};
}

const char* type_name(const value& v) noexcept {
  switch (v.GetType()) {
  case rapidjson::kNullType:
    return "null";
  case rapidjson::kFalseType:
  case rapidjson::kTrueType:
    return "boolean";
  case rapidjson::kObjectType:
    return "object";
  case rapidjson::kArrayType:
    return "array";
  case rapidjson::kStringType:
    return "string";
  case rapidjson::kNumberType:
    return "number";
  }
  return "unknown";
}

namespace {
[[noreturn]] void expected(const value& v, const path& p, const char* what) {
  raise(p, std::string{"expected "} + what + ", got " + type_name(v));
}
} // namespace

void expect_object(const value& v, const path& p) {
  if (!v.IsObject()) expected(v, p, "object");
}

void expect_array(const value& v, const path& p) {
  if (!v.IsArray()) expected(v, p, "array");
}

std::string as_string(const value& v, const path& p) {
  if (!v.IsString()) expected(v, p, "string");
  return std::string{v.GetString(), v.GetStringLength()};
}

bool as_bool(const value& v, const path& p) {
  if (!v.IsBool()) expected(v, p, "boolean");
  return v.GetBool();
}

double as_double(const value& v, const path& p) {
  if (!v.IsNumber()) expected(v, p, "number");
  auto d = v.GetDouble();
  if (!std::isfinite(d)) raise(p, "number out of range");
  return d;
}

int64_t as_int(const value& v, const path& p, int64_t min, int64_t max) {
  if (!v.IsNumber()) expected(v, p, "integer");
  auto bad = [&] { raise(p, range_text(min, static_cast<uint64_t>(max))); };
  if (v.IsInt64()) {
    auto x = v.GetInt64();
    if (x < min || x > max) bad();
    return x;
  }
  if (v.IsUint64()) bad(); // > INT64_MAX
  auto d = v.GetDouble();
  if (!std::isfinite(d)) bad();
  if (d != std::floor(d)) expected(v, p, "integer");
  if (d < static_cast<double>(min) || d >= 9223372036854775808.0 ||
      static_cast<int64_t>(d) > max || static_cast<int64_t>(d) < min)
    bad();
  return static_cast<int64_t>(d);
}

uint64_t as_uint(const value& v, const path& p, uint64_t max) {
  if (!v.IsNumber()) expected(v, p, "integer");
  auto bad = [&] { raise(p, range_text(0, max)); };
  if (v.IsUint64()) {
    auto x = v.GetUint64();
    if (x > max) bad();
    return x;
  }
  if (v.IsInt64()) bad(); // negative
  auto d = v.GetDouble();
  if (!std::isfinite(d)) bad();
  if (d != std::floor(d)) expected(v, p, "integer");
  if (d < 0 || d >= 18446744073709551616.0 || static_cast<uint64_t>(d) > max) bad();
  return static_cast<uint64_t>(d);
}

void no_nul(std::string_view s, const path& p) {
  if (s.find('\0') != std::string_view::npos) raise(p, "must not contain NUL bytes");
}

object_view::object_view(const value& v, const path& where)
    : v_(v)
    , where_(where) {
  expect_object(v, where);
}

const value* object_view::raw(std::string_view key) const {
  for (auto& m : v_.GetObject())
    if (key_of(m.name) == key) return &m.value;
  return nullptr;
}

const value* object_view::find(std::string_view key) const {
  auto v = raw(key);
  return v == nullptr || v->IsNull() ? nullptr : v;
}

const value& object_view::need(std::string_view key) const {
  auto v = find(key);
  if (v == nullptr) raise(at(key), "required");
  return *v;
}

std::string object_view::str(std::string_view key) const {
  return as_string(need(key), at(key));
}

std::optional<std::string> object_view::opt_str(std::string_view key) const {
  if (auto v = find(key)) return as_string(*v, at(key));
  return std::nullopt;
}

std::string object_view::str_or(std::string_view key, std::string fallback) const {
  if (auto v = find(key)) return as_string(*v, at(key));
  return fallback;
}

bool object_view::boolean_or(std::string_view key, bool fallback) const {
  if (auto v = find(key)) return as_bool(*v, at(key));
  return fallback;
}

uint64_t object_view::uint(std::string_view key, uint64_t max) const {
  return as_uint(need(key), at(key), max);
}

uint64_t object_view::uint_or(std::string_view key, uint64_t fallback, uint64_t max) const {
  if (auto v = find(key)) return as_uint(*v, at(key), max);
  return fallback;
}

int64_t object_view::integer(std::string_view key, int64_t min, int64_t max) const {
  return as_int(need(key), at(key), min, max);
}

raw_json object_view::raw_or_empty(std::string_view key) const {
  if (auto v = raw(key)) return canonical(*v, at(key));
  return {};
}

json_writer::json_writer()
    : w_(buf_) {}

json_writer& json_writer::begin_object() {
  w_.StartObject();
  return *this;
}

json_writer& json_writer::end_object() {
  w_.EndObject();
  return *this;
}

json_writer& json_writer::begin_array() {
  w_.StartArray();
  return *this;
}

json_writer& json_writer::end_array() {
  w_.EndArray();
  return *this;
}

json_writer& json_writer::key(std::string_view k) {
  if (valid_utf8(k))
    write_string(w_, buf_, k);
  else
    write_string(w_, buf_, sanitize_utf8(k));
  return *this;
}

json_writer& json_writer::str(std::string_view s) {
  if (valid_utf8(s))
    write_string(w_, buf_, s);
  else
    write_string(w_, buf_, sanitize_utf8(s));
  return *this;
}

json_writer& json_writer::boolean(bool b) {
  w_.Bool(b);
  return *this;
}

json_writer& json_writer::u64(uint64_t x) {
  w_.Uint64(x);
  return *this;
}

json_writer& json_writer::i64(int64_t x) {
  w_.Int64(x);
  return *this;
}

json_writer& json_writer::dbl(double x) {
  if (std::isfinite(x))
    w_.Double(x);
  else
    w_.Null();
  return *this;
}

json_writer& json_writer::null() {
  w_.Null();
  return *this;
}

json_writer& json_writer::raw(const raw_json& x) {
  if (x.empty()) {
    w_.Null();
    return *this;
  }
  // The writer places the separator; the bytes go in with one memcpy (RawValue copies a
  // byte at a time, and a flow's graph is tens of KB).
  w_.RawValue(x.text.data(), 0, rapidjson::kObjectType);
  std::memcpy(buf_.Push(x.text.size()), x.text.data(), x.text.size());
  return *this;
}

json_writer& json_writer::canonical(const value& v, const path& p) {
  write_canonical(w_, buf_, v, p);
  return *this;
}

json_writer& json_writer::document_key(std::string_view k) {
  write_string(w_, buf_, k);
  return *this;
}

std::string json_writer::take() {
  return std::string{buf_.GetString(), buf_.GetSize()};
}

std::vector<std::string> strings_of(const object_view& o, std::string_view key,
                                    bool refuse_nul) {
  std::vector<std::string> out;
  auto v = o.find(key);
  if (v == nullptr) return out;
  auto at = o.at(key);
  codec::expect_array(*v, at);
  size_t i = 0;
  for (auto& x : v->GetArray()) {
    auto p = at.at(i++);
    out.push_back(codec::as_string(x, p));
    if (refuse_nul) codec::no_nul(out.back(), p);
  }
  return out;
}

std::map<std::string, std::string> env_of(const object_view& o, std::string_view key) {
  std::map<std::string, std::string> out;
  auto v = o.find(key);
  if (v == nullptr) return out;
  object_view eo{*v, o.at(key)};
  for (auto& m : v->GetObject()) {
    std::string name{m.name.GetString(), m.name.GetStringLength()};
    auto at = eo.at(name);
    if (name.empty()) raise(at, "env key must not be empty");
    if (name.find('=') != std::string::npos) raise(at, "env key must not contain '='");
    no_nul(name, at);
    auto val = as_string(m.value, at);
    no_nul(val, at);
    out.emplace(std::move(name), std::move(val));
  }
  return out;
}

egress_policy decode_egress(const value* v, const path& p) {
  if (v == nullptr || v->IsNull()) return egress_policy::allow_all();
  expect_array(*v, p);
  std::vector<std::string> rules;
  size_t i = 0;
  for (auto& x : v->GetArray()) {
    auto at = p.at(i++);
    auto s = as_string(x, at);
    no_nul(s, at);
    rules.push_back(std::move(s));
  }
  auto field = p.str();
  auto res = parse_egress(rules, field);
  if (!res) throw decode_error{res.error().message};
  return std::move(res).value();
}

} // namespace codec

result<raw_json> parse_raw_json(std::string_view text, const decode_limits& limits) {
  return codec::decode_with<raw_json>(text, limits,
                                      [](const codec::value& v, const codec::path& p) {
                                        return result<raw_json>{codec::canonical(v, p)};
                                      });
}

std::string quote_json(std::string_view s) {
  codec::json_writer w;
  w.str(s);
  return w.take();
}

} // namespace guestflow
