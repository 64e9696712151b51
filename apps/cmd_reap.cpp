#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"

#include <charconv>
#include <iostream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage = R"(usage: guestflow reap [--older-than S]
       guestflow reap --reusable --idle-longer-than S

Deletes this runtime's orphaned ephemeral guests (gf-b-/gf-x- names carrying its owner
id) that are older than S seconds (default 0), e.g. after a `guestflow code` was killed
with SIGKILL. Another runtime's guests and reusable gf-c- guests are never touched. While
another guestflow process of this owner (same state dir) is running, its guests are not
orphans: reap then deletes nothing and exits 125.

With --reusable, deletes instead the reusable component guests (gf-c- names, created by
`guestflow component --reuse flow`, of any runtime) that have been idle longer than S
seconds, idle being now − the latest of created_at, last_resumed_at and paused_at. Runs
never delete a reusable guest themselves: it outlives the flow run by design, auto-pause
bounds its cost, and this is how it goes away (a guest refused for egress drift too).
Prints how many were deleted.)";

std::optional<uint32_t> seconds(const std::optional<std::string>& v) {
  uint32_t out = 0;
  if (!v)
    return out;
  auto [p, e] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (e != std::errc{} || p != v->data() + v->size() || v->empty())
    return std::nullopt;
  return out;
}

int run_reap(const std::vector<std::string>& argv) {
  signal_watch watch;
  args a{{"older-than", "idle-longer-than"}, {"reusable"}};
  if (auto err = a.parse(argv); err || !a.positionals().empty()) {
    std::cerr << "guestflow reap: " << err.value_or("unexpected argument") << "\n"
              << usage << '\n';
    return 2;
  }
  bool reusable = a.has("reusable");
  if (reusable ? (!a.has("idle-longer-than") || a.has("older-than"))
               : a.has("idle-longer-than")) {
    std::cerr << "guestflow reap: --reusable goes with --idle-longer-than S (and only with it)\n"
              << usage << '\n';
    return 2;
  }
  auto flag = reusable ? "idle-longer-than" : "older-than";
  auto s_value = seconds(a.get(flag));
  if (!s_value) {
    std::cerr << "guestflow reap: --" << flag << " expects seconds, got '" << *a.get(flag)
              << "'\n";
    return 2;
  }
  // No sweep at start: reap deletes what it is asked to, and counts it.
  auto s =
    session::open(cp::process_environment(), watch, nullptr, session::start_sweep::off);
  if (!s)
    return report_failure("reap", s.error());
  if (reusable) {
    auto n = (*s)->sweep_reusable(*s_value);
    if (!n)
      return report_failure("reap", n.error());
    std::cout << "deleted " << *n << '\n';
    return 0;
  }
  auto n = (*s)->sweep(*s_value);
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

const registrar reg{{"reap", "delete orphaned ephemeral guests, or idle reusable ones", usage,
                     run_reap}};

} // namespace
} // namespace guestflow::cli
