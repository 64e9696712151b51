#include "controlplane/local/images/archive_reader.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <cerrno>
#include <clocale>
#include <locale.h>
#include <vector>

namespace guestflow::local {
namespace {

constexpr size_t chunk_size = 64 * 1024;
constexpr size_t block_size = 512;
constexpr size_t typeflag_offset = 156;

failure malformed(uint64_t offset, const std::string& what) {
  return fail(ec::bad_request,
              "not a valid tar archive at byte " + std::to_string(offset) + ": " + what);
}

/// libarchive's message as the tail of ours ("Truncated tar archive" → "truncated tar
/// archive").
std::string said(archive* a) {
  const char* s = archive_error_string(a);
  std::string out = s != nullptr ? s : "unknown libarchive error";
  if (!out.empty() && out[0] >= 'A' && out[0] <= 'Z') out[0] = char(out[0] - 'A' + 'a');
  return out;
}

/// pax names are UTF-8 and libarchive converts them to the locale's charset; in the server's
/// "C" locale every non-ASCII name would fail to convert. Each libarchive call runs in
/// C.UTF-8 on this thread only (libarchive reads the charset with nl_langinfo, which
/// follows uselocale).
class utf8_locale_scope {
public:
  utf8_locale_scope() {
    static const locale_t utf8 = ::newlocale(LC_CTYPE_MASK, "C.UTF-8", locale_t(0));
    if (utf8 != locale_t(0)) old_ = ::uselocale(utf8);
  }
  ~utf8_locale_scope() {
    if (old_ != locale_t(0)) ::uselocale(old_);
  }
  utf8_locale_scope(const utf8_locale_scope&) = delete;
  utf8_locale_scope& operator=(const utf8_locale_scope&) = delete;

private:
  locale_t old_ = locale_t(0);
};

} // namespace

/// Two libarchive readers in a row: `raw` undoes the compression (any of the four filters,
/// then the "raw" format: the whole stream as one entry); `tar` reads the tar format from
/// what `raw` yields. The tar stream passes through `chunks`, the last two pieces handed to
/// libarchive, which is where a member's header block is found again for its type flag.
struct archive_reader::state {
  explicit state(byte_source& src)
      : in(src)
      , in_buf(chunk_size) {
    for (auto& c : chunks)
      c.bytes.resize(chunk_size);
  }

  ~state() {
    if (tar != nullptr) archive_read_free(tar);
    if (raw != nullptr) archive_read_free(raw);
  }

  struct chunk {
    std::vector<char> bytes;
    size_t len = 0;
    uint64_t offset = 0; ///< of its first byte in the tar stream
  };

  byte_source& in;
  std::vector<char> in_buf;
  chunk chunks[2];
  size_t current = 0;
  uint64_t served = 0;       ///< tar stream bytes handed to libarchive
  uint64_t source_bytes = 0; ///< input bytes read
  std::optional<failure> source_error;
  std::optional<failure> stream_error; ///< decompression failed
  archive* raw = nullptr;
  archive* tar = nullptr;
  bool opened = false;

  static la_ssize_t read_source(archive* a, void* self, const void** buf) {
    auto& s = *static_cast<state*>(self);
    auto n = s.in.read(s.in_buf.data(), s.in_buf.size());
    if (!n) {
      s.source_error = n.error();
      archive_set_error(a, EIO, "%s", n.error().message.c_str());
      return ARCHIVE_FATAL;
    }
    s.source_bytes += *n;
    *buf = s.in_buf.data();
    return static_cast<la_ssize_t>(*n);
  }

  static la_ssize_t read_stream(archive* a, void* self, const void** buf) {
    auto& s = *static_cast<state*>(self);
    s.current ^= 1;
    auto& c = s.chunks[s.current];
    auto n = archive_read_data(s.raw, c.bytes.data(), c.bytes.size());
    if (n < 0) {
      s.stream_failed();
      archive_set_error(a, EIO, "%s", s.stream_error->message.c_str());
      return ARCHIVE_FATAL;
    }
    c.len = size_t(n);
    c.offset = s.served;
    s.served += c.len;
    *buf = c.bytes.data();
    return n;
  }

  void stream_failed() {
    if (source_error || stream_error) return;
    // A failure while libarchive still sets the filter up names none yet.
    std::string filter =
        archive_filter_count(raw) > 1 ? archive_filter_name(raw, 0) : "compressed";
    stream_error =
        fail(ec::bad_request,
             "the " + filter + " data is corrupt or truncated (libarchive: " + said(raw) + ")");
  }

  /// The failure behind a libarchive error of `tar`: the source's, the decompressor's, or
  /// the tar reader's own, at the stream offset it stopped.
  failure tar_failure() const {
    if (source_error) return *source_error;
    if (stream_error) return *stream_error;
    return malformed(uint64_t(archive_filter_bytes(tar, 0)), said(tar));
  }

  result<bool> open() {
    opened = true;
    raw = archive_read_new();
    tar = archive_read_new();
    if (raw == nullptr || tar == nullptr) return fail(ec::unavailable, "libarchive: no memory");
    archive_read_support_filter_gzip(raw);
    archive_read_support_filter_xz(raw);
    archive_read_support_filter_zstd(raw);
    archive_read_support_filter_bzip2(raw);
    archive_read_support_format_raw(raw);
    if (archive_read_open(raw, this, nullptr, read_source, nullptr) != ARCHIVE_OK) {
      if (source_error) return *source_error;
      // The raw format takes any input of at least one byte.
      if (source_bytes == 0) return malformed(0, "the input is empty");
      stream_failed();
      return *stream_error;
    }
    archive_entry* whole = nullptr;
    if (archive_read_next_header(raw, &whole) != ARCHIVE_OK) {
      if (source_error) return *source_error;
      stream_failed();
      return *stream_error;
    }
    archive_read_support_format_tar(tar);
    if (archive_read_open(tar, this, nullptr, read_stream, nullptr) != ARCHIVE_OK) {
      if (source_error) return *source_error;
      if (stream_error) return *stream_error;
      if (served == 0) return malformed(0, "the input is empty once decompressed");
      // libarchive's tar reader takes a first block that is all zeros or a header whose
      // checksum and fields are right.
      return malformed(0, "bad header checksum or fields (not a tar archive, or a corrupt "
                          "one; libarchive: " +
                              said(tar) + ")");
    }
    return true;
  }

  /// The byte at `offset` of the tar stream, if it is still in one of the two chunks.
  std::optional<char> byte_at(uint64_t offset) const {
    for (const auto& c : chunks)
      if (offset >= c.offset && offset < c.offset + c.len) return c.bytes[offset - c.offset];
    return std::nullopt;
  }
};

archive_reader::archive_reader(byte_source& in)
    : s_(std::make_unique<state>(in)) {}

archive_reader::~archive_reader() = default;

uint64_t archive_reader::position() const noexcept {
  return s_->tar != nullptr && s_->opened ? uint64_t(archive_filter_bytes(s_->tar, 0)) : 0;
}

result<std::optional<tar_member>> archive_reader::next() {
  utf8_locale_scope utf8;
  if (!s_->opened)
    if (auto ok = s_->open(); !ok) return ok.error();
  archive_entry* e = nullptr;
  auto r = archive_read_next_header(s_->tar, &e);
  if (r == ARCHIVE_EOF) {
    if (s_->source_error) return *s_->source_error;
    if (s_->stream_error) return *s_->stream_error;
    return std::optional<tar_member>{};
  }
  // ARCHIVE_WARN too (a malformed pax record, a name that is not UTF-8): refused, not
  // guessed at; ARCHIVE_RETRY is a damaged header libarchive would skip over.
  if (r != ARCHIVE_OK) return s_->tar_failure();

  // The header block ends where the member's data starts: everything before it has been
  // consumed by now.
  auto data_at = uint64_t(archive_filter_bytes(s_->tar, 0));
  if (data_at < block_size) return malformed(data_at, "a member without a header");
  auto type = s_->byte_at(data_at - block_size + typeflag_offset);
  if (!type)
    return fail(ec::unavailable, "reading the tar stream: the header of the member at byte " +
                                     std::to_string(data_at - block_size) +
                                     " is no longer buffered");
  const char* raw_name = archive_entry_pathname(e);
  tar_member m;
  m.name = raw_name != nullptr ? raw_name : "";
  auto header_at = data_at - block_size;
  if (m.name.empty()) return malformed(header_at, "a member without a name");
  if (archive_entry_sparse_count(e) > 0)
    return malformed(header_at, "member \"" + m.name +
                                    "\" is a sparse file, which image imports do not "
                                    "support (re-create the tar without --sparse)");
  switch (*type) {
  case '0':
  case '\0':
  case '7':
  case '1':
  case '2':
  case '3':
  case '4':
  case '5':
  case '6':
  case 'D': // GNU dumpdir: a directory plus a listing we do not need
    break;
  case 'S':
    return malformed(header_at, "member \"" + m.name +
                                    "\" is a GNU sparse file, which image imports do not "
                                    "support (re-create the tar without --sparse)");
  case 'M':
    return malformed(header_at, "multi-volume archives are not supported");
  default:
    return malformed(header_at, "member \"" + m.name + "\" has the unsupported type '" +
                                    std::string(1, *type) + "'");
  }
  m.mode = static_cast<uint32_t>(archive_entry_perm(e) & 07777);
  if (const char* hard = archive_entry_hardlink(e)) {
    m.type = tar_member::kind::hardlink;
    m.link = hard;
    return std::optional<tar_member>{std::move(m)};
  }
  switch (archive_entry_filetype(e)) {
  case AE_IFREG:
    m.type = tar_member::kind::file;
    m.size = uint64_t(archive_entry_size(e));
    break;
  case AE_IFDIR:
    m.type = tar_member::kind::directory;
    break;
  case AE_IFLNK: {
    m.type = tar_member::kind::symlink;
    const char* target = archive_entry_symlink(e);
    m.link = target != nullptr ? target : "";
    break;
  }
  case AE_IFCHR:
    m.type = tar_member::kind::char_dev;
    break;
  case AE_IFBLK:
    m.type = tar_member::kind::block_dev;
    break;
  case AE_IFIFO:
    m.type = tar_member::kind::fifo;
    break;
  default:
    return malformed(header_at, "member \"" + m.name + "\" has an unsupported type");
  }
  return std::optional<tar_member>{std::move(m)};
}

result<size_t> archive_reader::read_data(char* buf, size_t n) {
  utf8_locale_scope utf8;
  auto r = archive_read_data(s_->tar, buf, n);
  if (r < 0) return s_->tar_failure();
  return size_t(r);
}

} // namespace guestflow::local
