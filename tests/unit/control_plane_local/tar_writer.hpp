#pragma once

// Builds tar archives byte by byte for the image tests, hostile ones included (absolute
// paths, "..", device nodes, links anywhere): no host tar would write most of them. Shared
// by tests/unit/control_plane_local and tests/integration/control_plane.

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace guestflow::testing {

struct tar_entry {
  std::string name;
  char type = '0'; ///< '0' file, '1' hard link, '2' symlink, '3'/'4' device, '5' dir, '6' FIFO
  std::string data;
  std::string link;
  uint32_t mode = 0644;
};

inline tar_entry file_entry(std::string name, std::string data, uint32_t mode = 0644) {
  return {std::move(name), '0', std::move(data), {}, mode};
}
inline tar_entry dir_entry(std::string name, uint32_t mode = 0755) {
  return {std::move(name), '5', {}, {}, mode};
}
inline tar_entry symlink_entry(std::string name, std::string target) {
  return {std::move(name), '2', {}, std::move(target), 0777};
}
inline tar_entry hardlink_entry(std::string name, std::string target) {
  return {std::move(name), '1', {}, std::move(target), 0644};
}

namespace tar_detail {

/// `len - 1` octal digits, zero-padded, then a NUL.
inline void put_octal(char* field, size_t len, uint64_t v) {
  field[len - 1] = '\0';
  for (size_t i = len - 1; i-- > 0; v /= 8)
    field[i] = char('0' + v % 8);
}

inline std::string header(const std::string& name, char type, uint64_t size,
                          const std::string& link, uint32_t mode) {
  std::string h(512, '\0');
  std::memcpy(h.data(), name.data(), std::min<size_t>(name.size(), 100));
  put_octal(h.data() + 100, 8, mode);
  put_octal(h.data() + 108, 8, 0);
  put_octal(h.data() + 116, 8, 0);
  put_octal(h.data() + 124, 12, size);
  put_octal(h.data() + 136, 12, 1700000000);
  h[156] = type;
  std::memcpy(h.data() + 157, link.data(), std::min<size_t>(link.size(), 100));
  std::memcpy(h.data() + 257,
              "ustar\0"
              "00",
              8);
  std::memset(h.data() + 148, ' ', 8);
  unsigned sum = 0;
  for (unsigned char c : h)
    sum += c;
  put_octal(h.data() + 148, 7, sum); // six digits, NUL, then the space below
  h[155] = ' ';
  return h;
}

inline void pad(std::string& out) {
  out.append((512 - out.size() % 512) % 512, '\0');
}

inline std::string pax_record(const std::string& key, const std::string& value) {
  // "LEN key=value\n" where LEN counts itself.
  auto body = " " + key + "=" + value + "\n";
  size_t len = body.size() + 1;
  while (std::to_string(len).size() + body.size() != len)
    ++len;
  return std::to_string(len) + body;
}

} // namespace tar_detail

/// A ustar archive of `entries` (names or links over 100 bytes go through a pax header),
/// ended by two zero blocks.
inline std::string make_tar(const std::vector<tar_entry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    if (e.name.size() > 100 || e.link.size() > 100) {
      std::string pax;
      if (e.name.size() > 100) pax += tar_detail::pax_record("path", e.name);
      if (e.link.size() > 100) pax += tar_detail::pax_record("linkpath", e.link);
      out += tar_detail::header("PaxHeader", 'x', pax.size(), {}, 0644);
      out += pax;
      tar_detail::pad(out);
    }
    out +=
        tar_detail::header(e.name, e.type, e.type == '0' ? e.data.size() : 0, e.link, e.mode);
    if (e.type == '0') {
      out += e.data;
      tar_detail::pad(out);
    }
  }
  out.append(1024, '\0');
  return out;
}

} // namespace guestflow::testing
