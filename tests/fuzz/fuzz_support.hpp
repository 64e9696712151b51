#pragma once

// What every fuzz target shares: a check that aborts (so libFuzzer and the corpus replay
// both report it with the input), and a deterministic way to cut an input into the chunks a
// network or a pipe would deliver, derived from the input itself so a replay cuts alike.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace guestflow::fuzz {

[[noreturn]] inline void check_failed(const char* expr, const std::string& what,
                                      const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n  %s\n", file, line, expr, what.c_str());
  std::abort();
}

/// Aborts with `what` when `cond` is false: a property the code under test broke.
#define FUZZ_CHECK(cond, what)                                                                 \
  do {                                                                                         \
    if (!(cond)) ::guestflow::fuzz::check_failed(#cond, (what), __FILE__, __LINE__);           \
  } while (0)

inline std::string_view as_view(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// FNV-1a of `s`: the seed of the chunk plan.
inline uint64_t fingerprint(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

/// A small deterministic generator (splitmix64).
class draws {
public:
  explicit draws(uint64_t seed)
      : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

private:
  uint64_t s_;
};

/// `s` cut into pieces of 1..max_chunk bytes (sizes drawn from `d`; mostly small, so that
/// boundaries land inside every token, sometimes large).
inline std::vector<std::string_view> chunks(std::string_view s, draws& d,
                                            size_t max_chunk = 64) {
  std::vector<std::string_view> out;
  while (!s.empty()) {
    size_t n = d.below(4) == 0 ? 1 + d.below(max_chunk * 4) : 1 + d.below(max_chunk / 8 + 1);
    n = n < s.size() ? n : s.size();
    out.push_back(s.substr(0, n));
    s.remove_prefix(n);
  }
  return out;
}

} // namespace guestflow::fuzz
