#include "controlplane/local/images/tar_reader.hpp"

#include <algorithm>
#include <cstring>

namespace guestflow::local {
namespace {

constexpr size_t block_size = 512;
/// A long name, link or pax header bigger than this is not a rootfs: refused.
constexpr uint64_t max_meta_bytes = uint64_t{1} << 20;

// Offsets in a ustar header block.
constexpr size_t off_name = 0, len_name = 100;
constexpr size_t off_mode = 100, len_mode = 8;
constexpr size_t off_size = 124, len_size = 12;
constexpr size_t off_chksum = 148, len_chksum = 8;
constexpr size_t off_type = 156;
constexpr size_t off_link = 157, len_link = 100;
constexpr size_t off_magic = 257;
constexpr size_t off_prefix = 345, len_prefix = 155;

failure malformed(uint64_t offset, const std::string& what) {
  return fail(ec::bad_request,
              "not a valid tar archive at byte " + std::to_string(offset) + ": " + what);
}

/// A NUL-terminated (or full-width) string field.
std::string field(const char* block, size_t off, size_t len) {
  const char* p = block + off;
  return std::string{p, strnlen(p, len)};
}

/// An octal number (spaces/NULs around it), or GNU base-256 (first byte's high bit set).
std::optional<uint64_t> number(const char* block, size_t off, size_t len) {
  auto* p = reinterpret_cast<const unsigned char*>(block + off);
  if (p[0] & 0x80) {
    if (p[0] & 0x40) return std::nullopt; // negative
    uint64_t v = p[0] & 0x3f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return std::nullopt; // overflow
      v = (v << 8) | p[i];
    }
    return v;
  }
  size_t i = 0;
  while (i < len && (p[i] == ' ' || p[i] == '\0'))
    ++i;
  uint64_t v = 0;
  bool any = false;
  for (; i < len && p[i] >= '0' && p[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + (p[i] - '0');
    any = true;
  }
  for (; i < len; ++i)
    if (p[i] != ' ' && p[i] != '\0') return std::nullopt;
  if (!any) return uint64_t{0};
  return v;
}

bool all_zero(const char* block) {
  for (size_t i = 0; i < block_size; ++i)
    if (block[i] != 0) return false;
  return true;
}

/// The header checksum: the sum of its bytes with the checksum field read as spaces
/// (unsigned, as POSIX says; some old writers summed signed chars — accepted too).
bool checksum_ok(const char* block) {
  auto stored = number(block, off_chksum, len_chksum);
  if (!stored) return false;
  uint64_t u = 0;
  int64_t s = 0;
  for (size_t i = 0; i < block_size; ++i) {
    bool in_field = i >= off_chksum && i < off_chksum + len_chksum;
    auto c = in_field ? ' ' : block[i];
    u += static_cast<unsigned char>(c);
    s += static_cast<signed char>(c);
  }
  return *stored == u || static_cast<int64_t>(*stored) == s;
}

uint64_t padded(uint64_t n) {
  return (n + block_size - 1) / block_size * block_size - n;
}

/// pax records "LEN KEY=VALUE\n"; the keys that matter here.
struct pax_fields {
  std::optional<std::string> path, linkpath;
  std::optional<uint64_t> size;
};

std::optional<std::string> parse_pax(const std::string& data, pax_fields& out) {
  size_t at = 0;
  while (at < data.size()) {
    size_t space = data.find(' ', at);
    if (space == std::string::npos) return "a pax record without a length";
    uint64_t len = 0;
    for (size_t i = at; i < space; ++i) {
      if (data[i] < '0' || data[i] > '9' || len > data.size()) return "a bad pax record length";
      len = len * 10 + uint64_t(data[i] - '0');
    }
    if (len < space - at + 3 || at + len > data.size() || data[at + len - 1] != '\n')
      return "a pax record overruns its header";
    std::string record = data.substr(space + 1, at + len - 1 - (space + 1));
    auto eq = record.find('=');
    if (eq == std::string::npos) return "a pax record without '='";
    auto key = record.substr(0, eq);
    auto value = record.substr(eq + 1);
    if (key == "path")
      out.path = value;
    else if (key == "linkpath")
      out.linkpath = value;
    else if (key == "size") {
      uint64_t v = 0;
      if (value.empty() || value.size() > 19) return "a bad pax size";
      for (char c : value) {
        if (c < '0' || c > '9') return "a bad pax size";
        v = v * 10 + uint64_t(c - '0');
      }
      out.size = v;
    }
    at += len;
  }
  return std::nullopt;
}

} // namespace

archive_compression detect_compression(const char* head, size_t n) noexcept {
  auto* p = reinterpret_cast<const unsigned char*>(head);
  if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b) return archive_compression::gzip;
  if (n >= 6 && std::memcmp(p,
                            "\xfd"
                            "7zXZ\0",
                            6) == 0)
    return archive_compression::xz;
  if (n >= 4 && p[0] == 0x28 && p[1] == 0xb5 && p[2] == 0x2f && p[3] == 0xfd)
    return archive_compression::zstd;
  if (n >= 3 && p[0] == 'B' && p[1] == 'Z' && p[2] == 'h') return archive_compression::bzip2;
  return archive_compression::none;
}

const char* to_string(archive_compression c) noexcept {
  switch (c) {
  case archive_compression::gzip:
    return "gzip";
  case archive_compression::xz:
    return "xz";
  case archive_compression::zstd:
    return "zstd";
  case archive_compression::bzip2:
    return "bzip2";
  default:
    return "none";
  }
}

result<bool> tar_reader::read_exact(char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    auto r = in_.read(buf + got, n - got);
    if (!r) return r.error();
    if (*r == 0) return false;
    got += *r;
    offset_ += *r;
  }
  return true;
}

result<bool> tar_reader::read_block(char* block, bool& at_end) {
  size_t got = 0;
  while (got < block_size) {
    auto r = in_.read(block + got, block_size - got);
    if (!r) return r.error();
    if (*r == 0) break;
    got += *r;
    offset_ += *r;
  }
  at_end = got == 0;
  if (got != 0 && got != block_size)
    return malformed(offset_, "the input ends inside a header block");
  return true;
}

result<bool> tar_reader::skip(uint64_t n) {
  char buf[16 * 1024];
  while (n > 0) {
    auto want = static_cast<size_t>(std::min<uint64_t>(n, sizeof buf));
    auto ok = read_exact(buf, want);
    if (!ok) return ok;
    if (!*ok) return malformed(offset_, "truncated: the input ends inside a member's data");
    n -= want;
  }
  return true;
}

result<std::string> tar_reader::read_small_data(uint64_t size, const char* what) {
  if (size > max_meta_bytes)
    return malformed(offset_, std::string{what} + " of " + std::to_string(size) +
                                  " bytes is larger than the limit of " +
                                  std::to_string(max_meta_bytes));
  std::string data(static_cast<size_t>(size), '\0');
  auto ok = read_exact(data.data(), data.size());
  if (!ok) return ok.error();
  if (!*ok) return malformed(offset_, std::string{"truncated inside "} + what);
  if (auto s = skip(padded(size)); !s) return s.error();
  return data;
}

result<std::optional<tar_member>> tar_reader::next() {
  if (auto s = skip(left_ + padding_); !s) return s.error();
  left_ = padding_ = 0;
  std::optional<std::string> long_name, long_link;
  pax_fields pax;
  char block[block_size];
  for (;;) {
    bool at_end = false;
    auto ok = read_block(block, at_end);
    if (!ok) return ok.error();
    if (at_end) {
      if (offset_ == 0) return malformed(0, "the input is empty");
      // An archive without its end-of-archive blocks still ends here (GNU tar accepts it).
      if (long_name || long_link || pax.path || pax.linkpath)
        return malformed(offset_, "the input ends after an extended header");
      return std::optional<tar_member>{};
    }
    if (all_zero(block)) {
      if (long_name || long_link || pax.path || pax.linkpath || pax.size)
        return malformed(offset_, "an extended header is followed by the end of the archive");
      return std::optional<tar_member>{}; // the rest (a second zero block, padding) is ignored
    }
    if (!checksum_ok(block))
      return malformed(offset_ - block_size, "bad header checksum (not a tar archive, or "
                                             "a corrupt one)");
    auto size = number(block, off_size, len_size);
    if (!size) return malformed(offset_ - block_size, "bad size field");
    const char type = block[off_type];
    if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
      const char* what = type == 'L'   ? "a GNU long name"
                         : type == 'K' ? "a GNU long link name"
                                       : "a pax header";
      auto data = read_small_data(*size, what);
      if (!data) return data.error();
      if (type == 'L' || type == 'K') {
        auto text = data->substr(0, strnlen(data->c_str(), data->size()));
        (type == 'L' ? long_name : long_link) = std::move(text);
      } else if (type == 'x') {
        if (auto err = parse_pax(*data, pax)) return malformed(offset_, *err);
      } // 'g': global pax headers (comments, mtimes) change nothing imported
      continue;
    }
    if (type == 'V') { // a volume label: not a member
      if (auto s = skip(*size + padded(*size)); !s) return s.error();
      continue;
    }

    tar_member m;
    if (long_name)
      m.name = *long_name;
    else {
      m.name = field(block, off_name, len_name);
      // POSIX ustar ("ustar\0" "00") keeps a prefix; GNU's "ustar  \0" uses those bytes
      // for other things.
      if (std::memcmp(block + off_magic,
                      "ustar\0"
                      "00",
                      8) == 0) {
        auto prefix = field(block, off_prefix, len_prefix);
        if (!prefix.empty()) m.name = prefix + "/" + m.name;
      }
    }
    if (pax.path) m.name = *pax.path;
    m.link = long_link ? *long_link : field(block, off_link, len_link);
    if (pax.linkpath) m.link = *pax.linkpath;
    if (pax.size) size = pax.size;
    auto mode = number(block, off_mode, len_mode);
    m.mode = mode ? static_cast<uint32_t>(*mode & 07777) : 0644;
    if (m.name.empty()) return malformed(offset_ - block_size, "a member without a name");
    if (m.name.find('\0') != std::string::npos || m.link.find('\0') != std::string::npos)
      return malformed(offset_ - block_size, "a name with a NUL byte");
    uint64_t data_size = *size;
    switch (type) {
    case '0':
    case '\0':
    case '7':
      m.type = !m.name.empty() && m.name.back() == '/' ? tar_member::kind::directory
                                                       : tar_member::kind::file;
      break;
    case '1':
      m.type = tar_member::kind::hardlink;
      break;
    case '2':
      m.type = tar_member::kind::symlink;
      break;
    case '3':
      m.type = tar_member::kind::char_dev;
      break;
    case '4':
      m.type = tar_member::kind::block_dev;
      break;
    case '5':
    case 'D': // GNU dumpdir: a directory plus a listing we do not need
      m.type = tar_member::kind::directory;
      break;
    case '6':
      m.type = tar_member::kind::fifo;
      break;
    case 'S':
      return malformed(offset_ - block_size, "member \"" + m.name +
                                                 "\" is a GNU sparse file, which image imports "
                                                 "do not support (re-create the tar without "
                                                 "--sparse)");
    case 'M':
      return malformed(offset_ - block_size, "multi-volume archives are not supported");
    default:
      return malformed(offset_ - block_size, "member \"" + m.name +
                                                 "\" has the unsupported type '" +
                                                 std::string(1, type) + "'");
    }
    if (m.type == tar_member::kind::file) m.size = data_size;
    left_ = data_size;
    padding_ = padded(data_size);
    return std::optional<tar_member>{std::move(m)};
  }
}

result<size_t> tar_reader::read_data(char* buf, size_t n) {
  if (left_ == 0) return size_t{0};
  auto want = static_cast<size_t>(std::min<uint64_t>(n, left_));
  auto r = in_.read(buf, want);
  if (!r) return r.error();
  if (*r == 0) return malformed(offset_, "truncated: the input ends inside a member's data");
  left_ -= *r;
  offset_ += *r;
  return *r;
}

} // namespace guestflow::local
