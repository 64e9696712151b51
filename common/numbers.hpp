#pragma once

// The one reader of integers that people write: environment variables, command-line flags,
// query parameters. Every such integer in guestflow goes through parse_uint, so they all
// follow one rule (below) and are refused in one wording.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace guestflow {

/// The rule: decimal digits only — no sign, no "0x", no digit separators, no blank inside —
/// optionally surrounded by blanks (those trim() removes: a value read from a file keeps
/// its newline), and within [min, max]. Empty or all blank is not a number; whether that
/// means "unset" is the caller's decision (environment variables: yes; flags: no).
std::optional<uint64_t> parse_uint(std::string_view text, uint64_t min = 0,
                                   uint64_t max = std::numeric_limits<uint64_t>::max());

/// parse_uint into a narrower unsigned type, whose range bounds [min, max] by default.
template<class T>
std::optional<T> parse_uint_as(std::string_view text, T min = std::numeric_limits<T>::min(),
                               T max = std::numeric_limits<T>::max()) {
  static_assert(std::is_unsigned_v<T>, "parse_uint_as reads unsigned integers");
  auto v = parse_uint(text, min, max);
  if (!v) return std::nullopt;
  return static_cast<T>(*v);
}

/// The one wording of a refused integer: "NAME: expected an integer in MIN..MAX, got
/// 'TEXT'" (TEXT trimmed, so the quote shows what was judged).
std::string uint_refusal(std::string_view name, std::string_view text, uint64_t min,
                         uint64_t max);

} // namespace guestflow
