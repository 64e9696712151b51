#pragma once

// Tar inputs for the two tar readers. A header's checksum is a sum no mutation keeps right,
// so each input is also tried with every non-zero 512-byte block's checksum field rewritten
// to match: the readers then get past the checksum into names, sizes, pax records and
// member types.

#include <cstdio>
#include <string>
#include <string_view>

namespace guestflow::fuzz {

inline std::string with_checksums_fixed(std::string_view in) {
  std::string out{in};
  constexpr size_t block = 512, at = 148, len = 8;
  for (size_t b = 0; b + block <= out.size(); b += block) {
    bool zero = true;
    for (size_t i = 0; i < block && zero; ++i)
      zero = out[b + i] == 0;
    if (zero) continue;
    unsigned sum = 0;
    for (size_t i = 0; i < block; ++i) {
      bool in_field = i >= at && i < at + len;
      sum += in_field ? ' ' : static_cast<unsigned char>(out[b + i]);
    }
    char field[16];
    std::snprintf(field, sizeof field, "%06o", sum & 0777777u);
    out.replace(b + at, 6, field, 6);
    out[b + at + 6] = '\0';
    out[b + at + 7] = ' ';
  }
  return out;
}

} // namespace guestflow::fuzz
