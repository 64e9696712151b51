#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace guestflow::cp {

/// Reassembles NDJSON lines from arbitrary byte chunks (HTTP chunk boundaries fall
/// anywhere, also inside a line or between '\r' and '\n'). A plain class: no I/O.
class ndjson_reader {
public:
  using line_fn = std::function<void(std::string_view)>;

  /// Longest accepted line in bytes (without its terminator): 16 MiB by default.
  explicit ndjson_reader(size_t max_line = size_t{16} << 20) : max_line_(max_line) {}

  /// Appends `bytes` and calls `on_line` for every line they complete, without "\n" or
  /// "\r\n"; blank lines are skipped. Returns false (and stays failed) once a line grows
  /// past `max_line`: at most `max_line` + 1 bytes (a pending '\r') are ever buffered.
  bool feed(std::string_view bytes, const line_fn& on_line);

  /// End of stream: delivers a non-empty unterminated last line. Returns false if failed.
  bool finish(const line_fn& on_line);

  bool failed() const noexcept { return failed_; }
  size_t buffered() const noexcept { return partial_.size(); }
  size_t max_line() const noexcept { return max_line_; }

private:
  bool emit(std::string_view line, const line_fn& on_line);
  bool fail();

  size_t max_line_;
  std::string partial_;
  bool failed_ = false;
};

} // namespace guestflow::cp
