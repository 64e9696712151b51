#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace guestflow::cli {

/// Minimal strict flag parser: `--flag value`, `--flag=value`, boolean `--switch`,
/// repeatable flags, positionals, and `--` ending the flags. Unknown flags are errors.
class args {
public:
  /// `valued` flags take a value, `switches` do not; both are given without the dashes.
  args(std::set<std::string> valued, std::set<std::string> switches);

  /// Parses; on error returns a message naming the offending argument.
  std::optional<std::string> parse(const std::vector<std::string>& argv);

  bool has(const std::string& flag) const { return values_.count(flag) > 0; }
  std::optional<std::string> get(const std::string& flag) const;
  std::vector<std::string> all(const std::string& flag) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  const std::vector<std::string>& rest() const { return rest_; } ///< after `--`

private:
  std::set<std::string> valued_;
  std::set<std::string> switches_;
  std::multimap<std::string, std::string> values_;
  std::vector<std::string> positionals_;
  std::vector<std::string> rest_;
};

} // namespace guestflow::cli
