#pragma once

#include <string>
#include <string_view>

namespace guestflow::local {

/// Makes a byte stream valid UTF-8 so it can travel in JSON strings: each maximal invalid
/// subpart (Unicode §3.9 "U+FFFD substitution of maximal subparts") becomes U+FFFD. Stateful,
/// because a pipe read may end inside a multi-byte sequence: the incomplete tail (≤ 3 bytes)
/// is held back until the next chunk, or replaced by flush() at end of stream.
class utf8_repair {
public:
  /// Valid UTF-8 for `bytes` (plus any held-back tail), minus a new incomplete tail.
  std::string feed(std::string_view bytes);

  /// End of stream: U+FFFD for a held-back incomplete sequence, else empty.
  std::string flush();

private:
  std::string pending_;
};

} // namespace guestflow::local
