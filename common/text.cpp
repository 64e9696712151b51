#include "common/text.hpp"

#include <algorithm>

namespace guestflow {

std::string_view trim(std::string_view text) {
  auto b = text.find_first_not_of(blanks);
  if (b == std::string_view::npos) return {};
  return text.substr(b, text.find_last_not_of(blanks) - b + 1);
}

std::string lower(std::string_view text) {
  std::string out{text};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::vector<std::string> split(std::string_view text, std::string_view separators) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size()) {
    auto j = std::min(text.find_first_of(separators, i), text.size());
    if (auto item = trim(text.substr(i, j - i)); !item.empty()) out.emplace_back(item);
    i = j + 1;
  }
  return out;
}

} // namespace guestflow
