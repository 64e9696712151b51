#include "apps/command.hpp"

#include <iostream>

namespace guestflow::cli {
namespace {

int run_version(const std::vector<std::string>&) {
  std::cout << "guestflow 0.1.0\n";
  return 0;
}

const registrar reg{{"version", "print the version", "usage: guestflow version", run_version}};

} // namespace
} // namespace guestflow::cli
