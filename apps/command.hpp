#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace guestflow::cli {

/// One `guestflow <name>` subcommand. Each lives in its own `cmd_<name>.cpp` and registers
/// itself with a static `registrar`, so adding a command never edits main.cpp.
struct command {
  std::string_view name;
  std::string_view summary; ///< one line for `guestflow --help`
  std::string_view usage;   ///< full usage text for `guestflow <name> --help`
  int (*run)(const std::vector<std::string>& args);
};

/// Adds a command to the table at static-initialization time.
struct registrar {
  explicit registrar(command c);
};

/// Every registered command, sorted by name.
const std::vector<command>& commands();

} // namespace guestflow::cli
