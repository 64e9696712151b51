#pragma once

#include "messages/error.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

/// Reading tar archives as a stream, for image imports (image_import.hpp): POSIX ustar,
/// GNU (long names 'L'/'K', base-256 numbers) and pax ('x' path/linkpath/size; 'g' global
/// headers are read and ignored). Nothing here touches a file system: it yields members and
/// their data; what becomes of them is image_import's policy. Malformed input is a
/// bad_request naming what is wrong; no input makes it allocate more than a few MiB.
namespace guestflow::local {

/// A blocking byte source (a file, or a decompressor's pipe).
class byte_source {
public:
  virtual ~byte_source() = default;
  /// Up to `n` bytes into `buf`; 0 at the end. Failures are unavailable (I/O) or
  /// bad_request (the source is not what it claims).
  virtual result<size_t> read(char* buf, size_t n) = 0;
};

/// One archive member, with GNU/pax long names and sizes applied.
struct tar_member {
  enum class kind : uint8_t {
    file,      ///< '0', '\0', '7' (contiguous)
    hardlink,  ///< '1': `link` names an earlier member
    symlink,   ///< '2'
    char_dev,  ///< '3'
    block_dev, ///< '4'
    directory, ///< '5' (also a V7 '0' whose name ends in '/')
    fifo,      ///< '6'
  };
  kind type = kind::file;
  std::string name; ///< as stored (not sanitised)
  std::string link; ///< hardlink / symlink target as stored
  uint32_t mode = 0;
  uint64_t size = 0; ///< data bytes (files; 0 for the others)
};

class tar_reader {
public:
  explicit tar_reader(byte_source& in)
      : in_(in) {}

  /// The next member; nullopt at the end of the archive (two zero blocks, or one followed
  /// by the end of the input). Any data of the previous member not read is skipped.
  result<std::optional<tar_member>> next();

  /// Up to `n` bytes of the current member's data; 0 once it is all read. A member whose
  /// data the input ends inside is a bad_request ("truncated").
  result<size_t> read_data(char* buf, size_t n);

private:
  result<bool> read_block(char* block, bool& at_end);
  result<bool> read_exact(char* buf, size_t n);
  result<bool> skip(uint64_t n);
  result<std::string> read_small_data(uint64_t size, const char* what);

  byte_source& in_;
  uint64_t left_ = 0;    ///< data bytes of the current member not yet read
  uint64_t padding_ = 0; ///< bytes after them up to the next block
  uint64_t offset_ = 0;  ///< of the input, for messages
};

/// The archive formats an import recognises from a file's first bytes.
enum class archive_compression : uint8_t { none, gzip, xz, zstd, bzip2 };

/// `head` (at least the first 6 bytes of a file, fewer if it is shorter) → its
/// compression by magic bytes; `none` for anything else (a tar is checked by its header).
archive_compression detect_compression(const char* head, size_t n) noexcept;

/// "gzip", "xz", "zstd", "bzip2" (or "none").
const char* to_string(archive_compression c) noexcept;

} // namespace guestflow::local
