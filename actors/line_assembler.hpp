#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace guestflow {

/// Reassembles lines from the arbitrary chunks a streamed exec delivers, with a hard cap
/// on one line: a line longer than `max_line` bytes is never buffered beyond the cap; the
/// assembler stops there (`overflowed()`) and ignores the rest of the stream.
class line_assembler {
public:
  explicit line_assembler(size_t max_line)
      : max_line_(max_line) {}

  /// Calls `on_line(std::string_view)` for every complete line in `chunk` (without its
  /// '\n' and a '\r' before it). Returns false once a line exceeded the cap.
  template<class F>
  bool feed(std::string_view chunk, F&& on_line) {
    while (!overflowed_ && !chunk.empty()) {
      auto nl = chunk.find('\n');
      auto piece = chunk.substr(0, nl);
      if (partial_.size() + piece.size() > max_line_) {
        overflowed_ = true;
        partial_.clear();
        partial_.shrink_to_fit();
        break;
      }
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

  bool overflowed() const noexcept { return overflowed_; }
  /// Bytes of an unfinished last line (at stream end: a truncated line).
  size_t pending() const noexcept { return partial_.size(); }
  size_t max_line() const noexcept { return max_line_; }

private:
  static std::string_view strip_cr(std::string_view s) {
    return !s.empty() && s.back() == '\r' ? s.substr(0, s.size() - 1) : s;
  }

  size_t max_line_;
  std::string partial_;
  bool overflowed_ = false;
};

} // namespace guestflow
