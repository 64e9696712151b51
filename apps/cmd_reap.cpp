#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"

#include <charconv>
#include <iostream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage = R"(usage: guestflow reap [--older-than S]

Deletes this runtime's orphaned ephemeral guests (gf-b-/gf-x- names carrying its owner
id) that are older than S seconds (default 0), e.g. after a `guestflow code` was killed
with SIGKILL. Another runtime's guests and reusable gf-c- guests are never touched.
Prints how many were deleted.)";

int run_reap(const std::vector<std::string>& argv) {
  signal_watch watch;
  args a{{"older-than"}, {}};
  if (auto err = a.parse(argv); err || !a.positionals().empty()) {
    std::cerr << "guestflow reap: " << err.value_or("unexpected argument") << "\n"
              << usage << '\n';
    return 2;
  }
  uint32_t older = 0;
  if (auto v = a.get("older-than")) {
    auto [p, e] = std::from_chars(v->data(), v->data() + v->size(), older);
    if (e != std::errc{} || p != v->data() + v->size()) {
      std::cerr << "guestflow reap: --older-than expects seconds, got '" << *v << "'\n";
      return 2;
    }
  }
  auto s = session::open(cp::process_environment(), watch);
  if (!s)
    return report_failure("reap", s.error());
  auto n = (*s)->sweep(older);
  if (!n)
    return report_failure("reap", n.error());
  auto pending = (*s)->drain();
  std::cout << "deleted " << (*n - std::min(*n, pending)) << '\n';
  if (pending > 0) {
    std::cerr << "guestflow reap: " << pending << " guest(s) could not be deleted yet\n";
    return 1;
  }
  return 0;
}

const registrar reg{{"reap", "delete orphaned ephemeral guests of this runtime", usage, run_reap}};

} // namespace
} // namespace guestflow::cli
