#include "actors/artifact_archive.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>
#include <unordered_map>

namespace guestflow::artifacts {
namespace {

constexpr size_t block = 512;

/// Field offsets and widths of a ustar header.
struct field {
  size_t at;
  size_t len;
};
constexpr field f_name{0, 100};
constexpr field f_size{124, 12};
constexpr field f_chksum{148, 8};
constexpr field f_type{156, 1};
constexpr field f_linkname{157, 100};
constexpr field f_magic{257, 6};
constexpr field f_version{263, 2};
constexpr field f_prefix{345, 155};

std::string_view raw(std::string_view hdr, field f) {
  return hdr.substr(f.at, f.len);
}

/// A NUL-terminated string field (the whole width when there is no NUL).
std::string text(std::string_view hdr, field f) {
  auto v = raw(hdr, f);
  return std::string{v.substr(0, v.find('\0'))};
}

failure malformed(size_t offset, const std::string& what) {
  return fail(ec::guest_failed,
              "artifact archive is malformed at byte " + std::to_string(offset) + ": " + what);
}

/// A numeric header field: octal digits after optional spaces, ended by NUL/space only, or
/// GNU base-256 (high bit of the first byte). nullopt for anything else.
std::optional<uint64_t> number(std::string_view v) {
  if (v.empty()) return std::nullopt;
  auto first = static_cast<unsigned char>(v[0]);
  if (first & 0x80) {
    if (first == 0xff) return std::nullopt; // negative
    uint64_t n = first & 0x7f;
    for (size_t i = 1; i < v.size(); ++i) {
      if (n >> 56) return std::nullopt; // would overflow
      n = (n << 8) | static_cast<unsigned char>(v[i]);
    }
    return n;
  }
  size_t i = 0;
  while (i < v.size() && v[i] == ' ')
    ++i;
  uint64_t n = 0;
  size_t digits = 0;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '7'; ++i, ++digits) {
    if (n >> 60) return std::nullopt;
    n = n * 8 + static_cast<uint64_t>(v[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  for (; i < v.size(); ++i)
    if (v[i] != '\0' && v[i] != ' ') return std::nullopt;
  return n;
}

bool all_zero(std::string_view b) {
  for (char c : b)
    if (c != '\0') return false;
  return true;
}

bool checksum_ok(std::string_view hdr) {
  auto stored = number(raw(hdr, f_chksum));
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0; // some old tars summed signed chars
  for (size_t i = 0; i < block; ++i) {
    bool in_field = i >= f_chksum.at && i < f_chksum.at + f_chksum.len;
    auto c = in_field ? ' ' : hdr[i];
    unsigned_sum += static_cast<unsigned char>(c);
    signed_sum += static_cast<signed char>(c);
  }
  return *stored == unsigned_sum || static_cast<int64_t>(*stored) == signed_sum;
}

uint64_t padded(uint64_t n) {
  return (n + block - 1) / block * block;
}

/// Pending values from pax / GNU meta members, applied to the next real member.
struct pending {
  std::optional<std::string> path;
  std::optional<std::string> linkpath;
  std::optional<uint64_t> size;
  bool sparse = false;
};

/// Parses pax records `LEN key=value\n`; `apply` false only validates (global headers).
std::optional<failure> parse_pax(std::string_view data, size_t offset, pending* apply) {
  size_t i = 0;
  while (i < data.size()) {
    if (data[i] == '\0' && all_zero(data.substr(i)))
      break; // trailing NUL padding some writers leave
    size_t j = i;
    uint64_t len = 0;
    while (j < data.size() && data[j] >= '0' && data[j] <= '9' && j - i < 20)
      len = len * 10 + static_cast<uint64_t>(data[j++] - '0');
    if (j == i || j >= data.size() || data[j] != ' ')
      return malformed(offset + i, "pax record without a length");
    if (len <= j - i + 1 || len > data.size() - i || data[i + len - 1] != '\n')
      return malformed(offset + i, "pax record length does not fit");
    auto rec = data.substr(j + 1, i + len - 1 - (j + 1)); // key=value without '\n'
    auto eq = rec.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return malformed(offset + i, "pax record without key=value");
    auto key = rec.substr(0, eq);
    auto value = rec.substr(eq + 1);
    if (apply) {
      if (key == "path") {
        apply->path = std::string{value};
      } else if (key == "linkpath") {
        apply->linkpath = std::string{value};
      } else if (key == "size") {
        uint64_t n = 0;
        if (value.empty() || value.size() > 19)
          return malformed(offset + i, "pax size is not a number");
        for (char c : value) {
          if (c < '0' || c > '9') return malformed(offset + i, "pax size is not a number");
          n = n * 10 + static_cast<uint64_t>(c - '0');
        }
        apply->size = n;
      } else if (key.substr(0, 11) == "GNU.sparse.") {
        apply->sparse = true;
      }
    }
    i += len;
  }
  return std::nullopt;
}

const char* link_or_special(char type) {
  switch (type) {
  case '1':
    return "hard link";
  case '2':
    return "symbolic link";
  case '3':
    return "character device";
  case '4':
    return "block device";
  case '6':
    return "fifo";
  default:
    return nullptr;
  }
}

/// Strips leading "./" (tar's own root prefix) and nothing else.
std::string strip_dot_slash(std::string p) {
  size_t i = 0;
  while (p.compare(i, 2, "./") == 0) {
    i += 2;
    while (i < p.size() && p[i] == '/')
      ++i;
  }
  return p.substr(i);
}

} // namespace

std::string unsafe_path_reason(std::string_view path) {
  if (path.empty()) return "empty path";
  if (path.find('\0') != std::string_view::npos) return "path contains a NUL byte";
  if (path[0] == '/') return "absolute path escapes the directory";
  size_t at = 0;
  for (;;) {
    auto slash = path.find('/', at);
    auto comp =
        path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
    if (comp == "..") return "path escapes the directory";
    if (slash == std::string_view::npos) return {};
    at = slash + 1;
  }
}

result<returned_files> unpack(std::string_view archive, const archive_limits& limits) {
  returned_files out;
  std::unordered_map<std::string, size_t> row_of; // path → index in out.files
  pending meta;
  size_t members = 0;
  size_t at = 0;
  for (;;) {
    if (archive.size() - at < block)
      return at == archive.size()
                 ? malformed(at,
                             "the archive ends without an end-of-archive marker (truncated)")
                 : malformed(at, "the archive ends inside a header (truncated)");
    auto hdr = archive.substr(at, block);
    if (all_zero(hdr)) {
      // End of archive: a zero block followed by another one (or, leniently, the end).
      if (meta.path || meta.linkpath || meta.size)
        return malformed(at, "an extended header is not followed by a member");
      break;
    }
    if (++members > limits.max_members)
      return malformed(at, "more than " + std::to_string(limits.max_members) + " members");
    if (!checksum_ok(hdr)) return malformed(at, "bad header checksum");
    auto header_size = number(raw(hdr, f_size));
    if (!header_size) return malformed(at + f_size.at, "the size field is not a number");
    char type = hdr[f_type.at];
    bool meta_member = type == 'x' || type == 'g' || type == 'L' || type == 'K';
    uint64_t size = meta_member ? *header_size : meta.size.value_or(*header_size);
    auto data_at = at + block;
    auto special = link_or_special(type);
    bool has_data = !(special || type == '5');
    uint64_t data_len = has_data ? size : 0;
    if (data_len > archive.size() - data_at || padded(data_len) > archive.size() - data_at)
      return malformed(at, "a member runs past the end of the archive (truncated)");
    auto data = archive.substr(data_at, static_cast<size_t>(data_len));
    auto next = data_at + static_cast<size_t>(padded(data_len));

    if (meta_member) {
      if (size > limits.max_meta_bytes)
        return malformed(at, "an extended header larger than " +
                                 std::to_string(limits.max_meta_bytes) + " bytes");
      if (type == 'x') {
        if (auto err = parse_pax(data, data_at, &meta)) return *err;
      } else if (type == 'g') {
        if (auto err = parse_pax(data, data_at, nullptr)) return *err;
      } else {
        auto value = std::string{data.substr(0, data.find('\0'))};
        (type == 'L' ? meta.path : meta.linkpath) = std::move(value);
      }
      at = next;
      continue;
    }

    // The member's path: pax / GNU long name, else ustar prefix + name.
    std::string path;
    if (meta.path) {
      path = *meta.path;
    } else {
      path = text(hdr, f_name);
      bool posix =
          raw(hdr, f_magic) == std::string_view{"ustar\0", 6} && raw(hdr, f_version) == "00";
      auto prefix = posix ? text(hdr, f_prefix) : std::string{};
      if (!prefix.empty()) path = prefix + "/" + path;
    }
    auto sparse = meta.sparse || type == 'S';
    meta = pending{};
    at = next;

    auto rel = strip_dot_slash(path);
    if (type == '5' || ((type == '0' || type == '\0') && !rel.empty() && rel.back() == '/'))
      continue; // directories are implied by the files' paths
    if (rel.empty() || rel == ".") continue;
    if (special) {
      out.dropped.push_back({path, special});
      continue;
    }
    if (sparse) {
      out.dropped.push_back({path, "sparse file (not supported)"});
      continue;
    }
    if (type != '0' && type != '\0' && type != '7') {
      out.dropped.push_back({path, std::string{"unsupported member type '"} + type + "'"});
      continue;
    }
    if (auto why = unsafe_path_reason(rel); !why.empty()) {
      out.dropped.push_back({path, why});
      continue;
    }
    returned_file f{rel, data.size(), std::string{data}};
    if (auto i = row_of.find(rel); i != row_of.end()) {
      out.files[i->second] = std::move(f);
    } else {
      row_of.emplace(rel, out.files.size());
      out.files.push_back(std::move(f));
    }
  }
  return out;
}

namespace {

struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

failure refused(const std::string& dir, const std::string& path, const std::string& why) {
  return fail(ec::bad_request,
              "cannot write returned file '" + path + "' under " + dir + ": " + why);
}

} // namespace

result<size_t> write_under(const std::string& dir, const std::vector<returned_file>& files) {
  std::error_code fs_err;
  std::filesystem::create_directories(dir, fs_err);
  if (fs_err) return fail(ec::bad_request, "cannot create " + dir + ": " + fs_err.message());
  fd_guard root{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (root.fd < 0)
    return fail(ec::bad_request, "cannot open " + dir + ": " + std::strerror(errno));
  size_t written = 0;
  for (const auto& f : files) {
    if (auto why = unsafe_path_reason(f.path); !why.empty()) return refused(dir, f.path, why);
    // Walk the parents one component at a time, never following a symbolic link.
    fd_guard cur{::dup(root.fd)};
    size_t at = 0;
    std::string leaf;
    for (;;) {
      auto slash = f.path.find('/', at);
      if (slash == std::string::npos) {
        leaf = f.path.substr(at);
        break;
      }
      auto comp = f.path.substr(at, slash - at);
      at = slash + 1;
      if (comp.empty() || comp == ".") continue;
      if (::mkdirat(cur.fd, comp.c_str(), 0755) != 0 && errno != EEXIST)
        return refused(dir, f.path, std::string{"mkdir: "} + std::strerror(errno));
      int next =
          ::openat(cur.fd, comp.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (next < 0)
        return refused(dir, f.path,
                       errno == ELOOP || errno == ENOTDIR
                           ? std::string{"a parent is not a directory (or is a symbolic link)"}
                           : std::string{std::strerror(errno)});
      ::close(cur.fd);
      cur.fd = next;
    }
    if (leaf.empty() || leaf == ".") return refused(dir, f.path, "the path names a directory");
    fd_guard out{::openat(cur.fd, leaf.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644)};
    if (out.fd < 0)
      return refused(dir, f.path,
                     errno == ELOOP ? std::string{"it is a symbolic link"}
                                    : std::string{std::strerror(errno)});
    size_t done = 0;
    while (done < f.bytes.size()) {
      auto n = ::write(out.fd, f.bytes.data() + done, f.bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return refused(dir, f.path, std::string{"write: "} + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    ++written;
  }
  return written;
}

} // namespace guestflow::artifacts
