#include "apps/args.hpp"

namespace guestflow::cli {

args::args(std::set<std::string> valued, std::set<std::string> switches)
    : valued_(std::move(valued))
    , switches_(std::move(switches)) {}

std::optional<std::string> args::parse(const std::vector<std::string>& argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const auto& a = argv[i];
    if (a == "--") {
      rest_.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
      return std::nullopt;
    }
    if (a.size() < 3 || a.compare(0, 2, "--") != 0) {
      positionals_.push_back(a);
      continue;
    }
    auto body = a.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = body.find('='); eq != std::string::npos) {
      inline_value = body.substr(eq + 1);
      body.resize(eq);
    }
    if (switches_.count(body)) {
      if (inline_value) return "--" + body + " takes no value";
      values_.emplace(body, "");
    } else if (valued_.count(body)) {
      if (inline_value) {
        values_.emplace(body, *inline_value);
      } else if (i + 1 < argv.size()) {
        values_.emplace(body, argv[++i]);
      } else {
        return "--" + body + " needs a value";
      }
    } else {
      // The flag only: an inline value (`--vars=NAME=SECRET`) is never echoed.
      return "unknown option --" + body;
    }
  }
  return std::nullopt;
}

std::optional<std::string> args::get(const std::string& flag) const {
  auto range = values_.equal_range(flag);
  if (range.first == range.second) return std::nullopt;
  return std::prev(range.second)->second;
}

std::vector<std::string> args::all(const std::string& flag) const {
  std::vector<std::string> out;
  auto range = values_.equal_range(flag);
  for (auto it = range.first; it != range.second; ++it)
    out.push_back(it->second);
  return out;
}

} // namespace guestflow::cli
