#pragma once

// The text helpers every layer shares (settings, flags, headers, names): one definition of
// a blank, one trim, one lower, one split. Bytes, not characters: no locale is consulted.

#include <string>
#include <string_view>
#include <vector>

namespace guestflow {

/// What trim() removes: space, tab, CR and LF — what shells, `.env` files and YAML leave
/// around a value. Nothing else is blank (no vertical tab, form feed or Unicode space).
inline constexpr std::string_view blanks = " \t\r\n";

/// `text` without leading and trailing blanks; a view into `text`.
std::string_view trim(std::string_view text);

/// ASCII lower case; every other byte (UTF-8 included) unchanged.
std::string lower(std::string_view text);

/// The items between any of `separators`, each trimmed, empty ones dropped:
/// split(" a, b,,c ", ",") == {"a", "b", "c"}.
std::vector<std::string> split(std::string_view text, std::string_view separators);

} // namespace guestflow
