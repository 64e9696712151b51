#pragma once

// Builds tar archives byte by byte for the tests: ustar headers with a correct checksum,
// pax extended headers, GNU long names, and whatever malformation a test needs.

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace guestflow::test {

struct tar_member {
  tar_member() = default;
  tar_member(std::string n, char t = '0', std::string d = {}, std::string link = {})
      : name(std::move(n))
      , type(t)
      , data(std::move(d))
      , linkname(std::move(link)) {}

  std::string name;
  char type = '0';
  std::string data;
  std::string linkname;
  std::string prefix;
  bool gnu_magic = false;
  std::string size_field; ///< raw size field override (malformations); empty = octal of data
};

inline void put_field(std::string& hdr, size_t at, size_t len, const std::string& v) {
  std::memcpy(&hdr[at], v.data(), std::min(len, v.size()));
}

inline std::string octal(uint64_t v, size_t width) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + (v & 7)));
    v >>= 3;
  } while (v);
  while (digits.size() < width - 1)
    digits.insert(digits.begin(), '0');
  return digits; // the NUL is the header's own zero fill
}

inline std::string tar_header(const tar_member& m) {
  std::string h(512, '\0');
  put_field(h, 0, 100, m.name);
  put_field(h, 100, 8, octal(0644, 8));
  put_field(h, 108, 8, octal(0, 8));
  put_field(h, 116, 8, octal(0, 8));
  put_field(h, 124, 12, m.size_field.empty() ? octal(m.data.size(), 12) : m.size_field);
  put_field(h, 136, 12, octal(1700000000, 12));
  h[156] = m.type;
  put_field(h, 157, 100, m.linkname);
  if (m.gnu_magic) {
    put_field(h, 257, 8, std::string("ustar  \0", 8));
  } else {
    put_field(h, 257, 6, std::string("ustar\0", 6));
    put_field(h, 263, 2, "00");
  }
  put_field(h, 345, 155, m.prefix);
  std::memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h)
    sum += c;
  put_field(h, 148, 8, octal(sum, 7));
  return h;
}

inline std::string padded(std::string data) {
  data.resize((data.size() + 511) / 512 * 512, '\0');
  return data;
}

inline std::string tar_entry(const tar_member& m) {
  return tar_header(m) + padded(m.data);
}

/// One pax record "LEN key=value\n" (LEN counts itself).
inline std::string pax_record(const std::string& key, const std::string& value) {
  auto body = " " + key + "=" + value + "\n";
  auto len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len)
    ++len;
  return std::to_string(len) + body;
}

inline std::string pax_entry(const std::vector<std::pair<std::string, std::string>>& recs,
                             char type = 'x') {
  tar_member m;
  m.name = "PaxHeaders/x";
  m.type = type;
  for (auto& [k, v] : recs)
    m.data += pax_record(k, v);
  return tar_entry(m);
}

inline std::string end_of_archive() {
  return std::string(1024, '\0');
}

} // namespace guestflow::test
