#pragma once

// The one line splitter for byte streams that arrive in arbitrary chunks (a guest's stdout,
// an NDJSON response body): header-only, no I/O, no allocation beyond the one partial line.

#include <cstddef>
#include <string>
#include <string_view>

namespace guestflow {

/// Reassembles lines from chunks cut anywhere (inside a line, between '\r' and '\n'). A
/// line is delivered without its '\n' and without one '\r' right before it; a lone '\r'
/// elsewhere is content; empty lines are delivered too (a caller that skips them says so).
/// A line longer than `max_line` bytes stops the assembler for good (`overflowed()`): it is
/// refused as soon as the buffered bytes can no longer become a line within the cap, and
/// never buffered beyond `max_line` + 1 bytes (the one extra being a '\r' whose '\n' has
/// not arrived yet).
class line_assembler {
public:
  explicit line_assembler(size_t max_line)
      : max_line_(max_line) {}

  /// Calls `on_line(std::string_view)` for every line `chunk` completes. Returns false once
  /// a line exceeded the cap (and from then on, without calling `on_line` again).
  template<class F>
  bool feed(std::string_view chunk, F&& on_line) {
    while (!overflowed_ && !chunk.empty()) {
      auto nl = chunk.find('\n');
      auto piece = chunk.substr(0, nl);
      if (too_long(piece)) return overflow();
      if (nl == std::string_view::npos) {
        partial_.append(piece.data(), piece.size());
        break;
      }
      chunk.remove_prefix(nl + 1);
      if (partial_.empty()) {
        on_line(strip_cr(piece)); // the common case: no copy
      } else {
        partial_.append(piece.data(), piece.size());
        on_line(strip_cr(partial_));
        partial_.clear();
      }
    }
    return !overflowed_;
  }

  /// End of stream: delivers an unterminated last line, if any (its trailing '\r' removed,
  /// the cap applied). Returns false if the assembler overflowed, now or before.
  template<class F>
  bool finish(F&& on_line) {
    if (overflowed_) return false;
    if (partial_.empty()) return true;
    std::string last;
    last.swap(partial_);
    auto line = strip_cr(last);
    if (line.size() > max_line_) return overflow();
    on_line(line);
    return true;
  }

  bool overflowed() const noexcept { return overflowed_; }
  /// Bytes of an unfinished last line (at stream end: a truncated line).
  size_t pending() const noexcept { return partial_.size(); }
  size_t max_line() const noexcept { return max_line_; }

private:
  static std::string_view strip_cr(std::string_view s) {
    return !s.empty() && s.back() == '\r' ? s.substr(0, s.size() - 1) : s;
  }

  /// Whether the buffered line plus `piece` (up to a '\n' or the chunk's end) is already
  /// over the cap: more than `max_line` bytes, unless the one extra byte is a final '\r'.
  bool too_long(std::string_view piece) const {
    auto n = partial_.size() + piece.size();
    if (n <= max_line_) return false;
    if (n > max_line_ + 1) return true;
    char last = piece.empty() ? partial_.back() : piece.back();
    return last != '\r';
  }

  bool overflow() {
    overflowed_ = true;
    std::string{}.swap(partial_);
    return false;
  }

  size_t max_line_;
  std::string partial_;
  bool overflowed_ = false;
};

} // namespace guestflow
