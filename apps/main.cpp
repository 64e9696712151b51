#include "apps/command.hpp"

#include <algorithm>
#include <iostream>

namespace guestflow::cli {
namespace {

std::vector<command>& table() {
  static std::vector<command> instance;
  return instance;
}

int print_help(std::ostream& out) {
  out << "guestflow — run Langflow work inside disposable guests\n\n"
         "usage: guestflow <command> [options]\n\ncommands:\n";
  for (const auto& c : commands())
    out << "  " << c.name << std::string(16 - std::min<size_t>(c.name.size(), 15), ' ')
        << c.summary << '\n';
  out << "\n`guestflow <command> --help` describes one command.\n";
  return 0;
}

} // namespace

registrar::registrar(command c) {
  table().push_back(c);
}

const std::vector<command>& commands() {
  auto& t = table();
  std::sort(t.begin(), t.end(),
            [](const command& a, const command& b) { return a.name < b.name; });
  return t;
}

} // namespace guestflow::cli

int main(int argc, char** argv) {
  using namespace guestflow::cli;
  if (argc < 2) {
    print_help(std::cerr);
    return 2;
  }
  if (std::string_view{argv[1]} == "--help" || std::string_view{argv[1]} == "-h")
    return print_help(std::cout);
  std::string_view name = argv[1];
  if (name == "--version") name = "version"; // the flag packagers and scripts expect
  for (const auto& c : commands()) {
    if (c.name != name) continue;
    std::vector<std::string> rest(argv + 2, argv + argc);
    if (!rest.empty() && (rest[0] == "--help" || rest[0] == "-h")) {
      std::cout << c.usage << '\n';
      return 0;
    }
    return c.run(rest);
  }
  std::cerr << "guestflow: unknown command '" << name << "'\n";
  print_help(std::cerr);
  return 2;
}
