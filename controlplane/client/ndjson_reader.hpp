#pragma once

#include "common/line_assembler.hpp"

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace guestflow::cp {

/// Reassembles NDJSON lines from arbitrary byte chunks (HTTP chunk boundaries fall
/// anywhere, also inside a line or between '\r' and '\n'): guestflow's one line splitter
/// (common/line_assembler.hpp), skipping blank lines as NDJSON allows. A plain class: no I/O.
class ndjson_reader {
public:
  using line_fn = std::function<void(std::string_view)>;

  /// Longest accepted line in bytes (without its terminator): 16 MiB by default.
  explicit ndjson_reader(size_t max_line = size_t{16} << 20)
      : lines_(max_line) {}

  /// Appends `bytes` and calls `on_line` for every line they complete, without "\n" or
  /// "\r\n"; blank lines are skipped. Returns false (and stays failed) once a line grows
  /// past `max_line`: at most `max_line` + 1 bytes (a pending '\r') are ever buffered.
  bool feed(std::string_view bytes, const line_fn& on_line) {
    return lines_.feed(bytes, [&on_line](std::string_view line) {
      if (!line.empty()) on_line(line);
    });
  }

  /// End of stream: delivers a non-empty unterminated last line. Returns false if failed.
  bool finish(const line_fn& on_line) {
    return lines_.finish([&on_line](std::string_view line) {
      if (!line.empty()) on_line(line);
    });
  }

  bool failed() const noexcept { return lines_.overflowed(); }
  size_t buffered() const noexcept { return lines_.pending(); }
  size_t max_line() const noexcept { return lines_.max_line(); }

private:
  line_assembler lines_;
};

} // namespace guestflow::cp
