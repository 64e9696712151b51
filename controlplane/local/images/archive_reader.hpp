#pragma once

#include "messages/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

/// Reading a rootfs tar as a stream, for image imports (image_import.hpp), with libarchive:
/// gzip, xz, zstd and bzip2 recognised by their magic bytes and decompressed in-process, then
/// POSIX ustar, GNU (long names, base-256 numbers) and pax read by libarchive's tar reader —
/// upstream's code, fuzzed upstream. Nothing here touches a file system: it yields members
/// and their data; what becomes of them is image_import's policy. Malformed input is a
/// bad_request naming what is wrong; libarchive bounds what an input makes it allocate (an
/// extended header is at most 1 MiB of pax records or 2 MiB of GNU long name).
namespace guestflow::local {

/// A blocking byte source (a file, or bytes in memory).
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
    directory, ///< '5', 'D' (also a '0' whose name ends in '/')
    fifo,      ///< '6'
  };
  kind type = kind::file;
  std::string name; ///< as stored (not sanitised)
  std::string link; ///< hardlink / symlink target as stored
  uint32_t mode = 0;
  uint64_t size = 0; ///< data bytes (files; 0 for the others)
};

/// The tar members of `in`, compressed or not. libarchive reads every type flag it does not
/// know as a regular file (as POSIX says) and a GNU sparse member as the file it stands
/// for; the import's policy refuses both (and multi-volume members), so the reader looks at
/// the one byte libarchive normalises away: each member's own header's type flag.
class archive_reader {
public:
  explicit archive_reader(byte_source& in);
  ~archive_reader();
  archive_reader(const archive_reader&) = delete;
  archive_reader& operator=(const archive_reader&) = delete;

  /// The next member; nullopt at the end of the archive. Any data of the previous member
  /// not read is skipped.
  result<std::optional<tar_member>> next();

  /// Up to `n` bytes of the current member's data; 0 once it is all read. A member whose
  /// data the input ends inside is a bad_request ("truncated").
  result<size_t> read_data(char* buf, size_t n);

  /// Bytes of the uncompressed tar stream read so far.
  uint64_t position() const noexcept;

  struct state;

private:
  std::unique_ptr<state> s_;
};

} // namespace guestflow::local
