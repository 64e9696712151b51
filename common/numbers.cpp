#include "common/numbers.hpp"

#include "common/text.hpp"

#include <charconv>

namespace guestflow {

std::optional<uint64_t> parse_uint(std::string_view text, uint64_t min, uint64_t max) {
  auto digits = trim(text);
  // from_chars alone would take a leading '-' for signed types only, but it is the first
  // byte that must be a digit for the rule to hold whatever the type.
  if (digits.empty() || digits.front() < '0' || digits.front() > '9') return std::nullopt;
  uint64_t v = 0;
  auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (err != std::errc{} || end != digits.data() + digits.size() || v < min || v > max)
    return std::nullopt;
  return v;
}

std::string uint_refusal(std::string_view name, std::string_view text, uint64_t min,
                         uint64_t max) {
  std::string out{name};
  out += ": expected an integer in ";
  out += std::to_string(min) + ".." + std::to_string(max) + ", got '";
  out += trim(text);
  out += '\'';
  return out;
}

} // namespace guestflow
