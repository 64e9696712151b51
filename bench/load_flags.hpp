#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace guestflow::bench {

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
      inflight.push_back(std::stoul(argv[++i]));
    else if (a == "--latency-ms" && valued)
      latency_ms = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (a == "--rounds" && valued)
      rounds = std::max<size_t>(1, std::stoul(argv[++i]));
    else if (a == "--smoke")
      smoke = true;
    else
      return false;
    return true;
  }
};

} // namespace guestflow::bench
