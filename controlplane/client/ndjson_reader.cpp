#include "controlplane/client/ndjson_reader.hpp"

namespace guestflow::cp {

bool ndjson_reader::emit(std::string_view line, const line_fn& on_line) {
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  if (line.size() > max_line_)
    return false;
  if (!line.empty())
    on_line(line);
  return true;
}

bool ndjson_reader::fail() {
  failed_ = true;
  std::string{}.swap(partial_);
  return false;
}

bool ndjson_reader::feed(std::string_view bytes, const line_fn& on_line) {
  if (failed_)
    return false;
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    auto piece = bytes.substr(0, nl);
    // One byte of slack: a line's "\r" may arrive before its "\n".
    if (partial_.size() + piece.size() > max_line_ + 1)
      return fail();
    if (nl == std::string_view::npos) {
      partial_.append(piece);
      return true;
    }
    bool ok;
    if (partial_.empty()) {
      ok = emit(piece, on_line);
    } else {
      partial_.append(piece);
      ok = emit(partial_, on_line);
      partial_.clear();
    }
    if (!ok)
      return fail();
    bytes.remove_prefix(nl + 1);
  }
  return true;
}

bool ndjson_reader::finish(const line_fn& on_line) {
  if (failed_)
    return false;
  std::string last;
  last.swap(partial_);
  return emit(last, on_line) || fail();
}

} // namespace guestflow::cp
