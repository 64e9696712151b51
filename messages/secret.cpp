#include "messages/secret.hpp"

#include "messages/json_codec.hpp"

#include <algorithm>
#include <cstring>
#include <string.h>

namespace guestflow {

bool same_secret(std::string_view offered, std::string_view expected) noexcept {
  unsigned char diff = offered.size() != expected.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    auto o = i < offered.size() ? static_cast<unsigned char>(offered[i]) : 0;
    diff |= static_cast<unsigned char>(o ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

// -- secret_vars ------------------------------------------------------------------------

std::vector<std::string> secret_vars::names() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (auto& kv : values_)
    out.push_back(kv.first);
  return out;
}

secret_vars::map_type secret_vars::redacted() const {
  map_type out;
  for (auto& kv : values_)
    out.emplace_hint(out.end(), kv.first, std::string{redacted_value});
  return out;
}

std::string to_string(const secret_vars& x) {
  std::string out = "{";
  for (auto& name : x.names()) {
    if (out.size() > 1) out += ',';
    out += quote_json(name);
    out += ':';
    out += quote_json(redacted_value);
  }
  out += '}';
  return out;
}

std::ostream& operator<<(std::ostream& os, const secret_vars& x) {
  return os << to_string(x);
}

// -- secret_scrubber --------------------------------------------------------------------

secret_scrubber::secret_scrubber(const secret_vars& vars) {
  for (auto& kv : vars.reveal())
    if (kv.second.size() >= min_scrubbed_bytes) needles_.push_back(kv.second);
  // Longest first, duplicates dropped: the search order does not change the merged spans,
  // but a value that is a prefix of another is then found inside it anyway.
  std::sort(needles_.begin(), needles_.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() > b.size() : a < b;
  });
  needles_.erase(std::unique(needles_.begin(), needles_.end()), needles_.end());
  for (auto& n : needles_) {
    auto quoted = quote_json(n);
    auto inside = quoted.substr(1, quoted.size() - 2);
    if (inside != n) json_needles_.push_back(std::move(inside));
  }
}

std::vector<std::pair<size_t, size_t>> secret_scrubber::matches(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> spans;
  for (auto& n : needles_) {
    if (n.size() > text.size()) continue;
    size_t from = 0;
    while (from + n.size() <= text.size()) {
      auto* hit = static_cast<const char*>(
          ::memmem(text.data() + from, text.size() - from, n.data(), n.size()));
      if (hit == nullptr) break;
      auto at = static_cast<size_t>(hit - text.data());
      spans.emplace_back(at, at + n.size());
      from = at + 1; // overlapping occurrences too: "abab" in "ababab" twice
    }
  }
  if (spans.size() < 2) return spans;
  std::sort(spans.begin(), spans.end());
  std::vector<std::pair<size_t, size_t>> merged;
  merged.push_back(spans.front());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, spans[i].second);
    else
      merged.push_back(spans[i]);
  }
  return merged;
}

bool secret_scrubber::found_in(std::string_view text) const {
  for (auto& n : needles_)
    if (n.size() <= text.size() &&
        ::memmem(text.data(), text.size(), n.data(), n.size()) != nullptr)
      return true;
  return false;
}

namespace {

/// Rewrites `v` into `w` with every secret replaced (see secret_scrubber::scrub_json).
void write_scrubbed(json_writer& w, const codec::value& v, const codec::path& p,
                    const secret_scrubber& s) {
  if (v.IsString()) {
    std::string text{v.GetString(), v.GetStringLength()};
    s.scrub(text);
    w.str(text);
  } else if (v.IsObject()) {
    w.begin_object();
    for (auto& m : v.GetObject()) {
      std::string key{m.name.GetString(), m.name.GetStringLength()};
      s.scrub(key);
      w.key(key);
      write_scrubbed(w, m.value, p.field(key), s);
    }
    w.end_object();
  } else if (v.IsArray()) {
    w.begin_array();
    size_t i = 0;
    for (auto& e : v.GetArray())
      write_scrubbed(w, e, p.at(i++), s);
    w.end_array();
  } else {
    auto literal = codec::canonical(v, p); // a number, true, false or null
    if (s.found_in(literal.text))
      w.str(redacted_value);
    else
      w.raw(literal);
  }
}

} // namespace

bool secret_scrubber::scrub_json(raw_json& x) const {
  if (needles_.empty() || x.empty()) return false;
  auto found = found_in(x.text) || std::any_of(json_needles_.begin(), json_needles_.end(),
                                               [&](const std::string& n) {
                                                 return x.text.find(n) != std::string::npos;
                                               });
  if (!found) return false;
  // Rare (a run that printed its secret): parse and rewrite, string by string.
  auto rewritten = codec::guarded<raw_json>([&]() -> result<raw_json> {
    codec::document doc;
    decode_limits limits;
    limits.max_bytes = x.text.size() + 1;
    if (auto err = codec::parse(x.text, limits, doc)) return std::move(*err);
    json_writer w;
    codec::path root;
    write_scrubbed(w, doc, root, *this);
    return raw_json{w.take()};
  });
  // Not JSON after all (a raw_json is canonical, so this is a bug elsewhere): mask the text
  // as a whole rather than let a secret through.
  if (!rewritten) {
    x = raw_json{quote_json(redacted_value)};
    return true;
  }
  x = std::move(*rewritten);
  return true;
}

size_t secret_scrubber::unfinished_tail(std::string_view text) const {
  size_t longest = 0;
  for (auto& n : needles_) {
    // Each place in the last n.size() - 1 bytes where n's first byte is, longest first.
    auto window = std::min(n.size() - 1, text.size());
    for (size_t from = text.size() - window; from < text.size(); ++from) {
      auto len = text.size() - from;
      if (len <= longest) break;
      if (text[from] == n[0] && std::memcmp(text.data() + from, n.data(), len) == 0) {
        longest = len;
        break;
      }
    }
  }
  return longest;
}

bool secret_scrubber::scrub(std::string& text) const {
  if (needles_.empty()) return false;
  auto spans = matches(text);
  if (spans.empty()) return false;
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (auto& [begin, end] : spans) {
    out.append(text, at, begin - at);
    out.append(redacted_value.data(), redacted_value.size());
    at = end;
  }
  out.append(text, at, std::string::npos);
  text = std::move(out);
  return true;
}

} // namespace guestflow
