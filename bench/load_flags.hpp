#pragma once

#include "common/numbers.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow::bench {

/// The integer value of a bench's `flag`, by common/numbers' rule. Anything else ends the
/// bench with that rule's refusal and exit status 2, as an unknown flag does, rather than
/// an uncaught std::stoul exception or a negative number wrapped around.
template<class T>
T uint_flag(std::string_view flag, std::string_view text, T min = 0,
            T max = std::numeric_limits<T>::max()) {
  if (auto v = parse_uint_as<T>(text, min, max)) return *v;
  std::fprintf(stderr, "%s\n", uint_refusal(flag, text, min, max).c_str());
  std::exit(2);
}

/// The flags the runtime's load benches share: `--inflight K` (repeatable), `--latency-ms N`,
/// `--rounds R` (at least 1) and `--smoke`. Each bench parses its own flags besides.
struct load_flags {
  std::vector<size_t> inflight;
  uint32_t latency_ms = 50;
  size_t rounds;
  bool smoke = false;

  explicit load_flags(size_t default_rounds)
      : rounds(default_rounds) {}

  /// Takes argv[i] if it is one of these flags, and its value (advancing i); false for any
  /// other argument.
  bool take(int& i, int argc, char** argv) {
    std::string a = argv[i];
    bool valued = i + 1 < argc;
    if (a == "--inflight" && valued)
      inflight.push_back(uint_flag<size_t>(a, argv[++i], 1));
    else if (a == "--latency-ms" && valued)
      latency_ms = uint_flag<uint32_t>(a, argv[++i]);
    else if (a == "--rounds" && valued)
      rounds = std::max<size_t>(1, uint_flag<size_t>(a, argv[++i]));
    else if (a == "--smoke")
      smoke = true;
    else
      return false;
    return true;
  }
};

} // namespace guestflow::bench
