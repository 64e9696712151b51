#include "controlplane/local/http/utf8_repair.hpp"

#include <cstdint>

namespace guestflow::local {
namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD";

/// Length of the sequence a lead byte starts and the range of its second byte; 0 if invalid.
struct lead_info {
  size_t length;
  uint8_t lo;
  uint8_t hi;
};

lead_info classify(uint8_t b) {
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F}; // no UTF-16 surrogates
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F}; // nothing above U+10FFFF
  return {0, 0, 0};
}

} // namespace

std::string utf8_repair::feed(std::string_view bytes) {
  std::string in;
  if (!pending_.empty()) {
    in = std::move(pending_);
    pending_.clear();
    in.append(bytes);
    bytes = in;
  }
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    auto b = static_cast<uint8_t>(bytes[i]);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      ++i;
      continue;
    }
    auto info = classify(b);
    if (info.length == 0) {
      out.append(replacement);
      ++i;
      continue;
    }
    // Count the valid continuation bytes that follow the lead.
    size_t ok = 1;
    while (ok < info.length && i + ok < bytes.size()) {
      auto c = static_cast<uint8_t>(bytes[i + ok]);
      auto lo = ok == 1 ? info.lo : uint8_t{0x80};
      auto hi = ok == 1 ? info.hi : uint8_t{0xBF};
      if (c < lo || c > hi) break;
      ++ok;
    }
    if (ok == info.length) {
      out.append(bytes.substr(i, ok));
    } else if (i + ok == bytes.size()) {
      pending_.assign(bytes.substr(i)); // may complete in the next chunk
    } else {
      out.append(replacement); // maximal subpart: the lead and its valid continuations
    }
    i += ok;
  }
  return out;
}

std::string utf8_repair::flush() {
  if (pending_.empty()) return {};
  pending_.clear();
  return std::string{replacement};
}

} // namespace guestflow::local
