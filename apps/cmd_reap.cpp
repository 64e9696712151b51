#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "common/numbers.hpp"

#include <cstdint>
#include <iostream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage = R"(usage: guestflow reap [--older-than S]
       guestflow reap --reusable --idle-longer-than S

Deletes this runtime's orphaned ephemeral guests (gf-b-/gf-x- names carrying its owner
id) that are older than S seconds (default 0), e.g. after a `guestflow code` was killed
with SIGKILL. Another runtime's guests and reusable gf-c- guests are never touched. While
another guestflow process of this owner (same state dir: a run, or a `serve` holding the
embedded control plane there) is running, its guests are not orphans: reap then deletes
nothing and exits 125 at once.

With --reusable, deletes instead the reusable component guests (gf-c- names, created by
`guestflow component --reuse flow`, of any runtime) that have been idle longer than S
seconds, idle being now − the latest of created_at, last_resumed_at and paused_at. Runs
never delete a reusable guest themselves: it outlives the flow run by design, auto-pause
bounds its cost, and this is how it goes away (a guest refused for egress drift too).
Prints how many were deleted.)";

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
    std::cerr
        << "guestflow reap: --reusable goes with --idle-longer-than S (and only with it)\n"
        << usage << '\n';
    return 2;
  }
  auto flag = reusable ? "idle-longer-than" : "older-than";
  // Seconds; --older-than may be left out (0: every orphan).
  auto text = a.get(flag).value_or("0");
  auto s_value = parse_uint_as<uint32_t>(text);
  if (!s_value) {
    std::cerr << "guestflow reap: "
              << uint_refusal(std::string{"--"} + flag, text, 0, UINT32_MAX) << " (seconds)\n";
    return 2;
  }
  // No sweep at start: reap deletes what it is asked to, and counts it.
  // Its embedded control plane keeps no pool: starting it deletes the pool guests a killed
  // control plane left in the state dir (reconcile hands them to a pool that wants none).
  // Another guestflow holding the embedded state dir (a `serve`, a run) is a live process
  // of this owner: refused at once, as the owner's lease is, rather than waited for.
  auto s = session::open(cp::process_environment(), watch, nullptr, session::start_sweep::off,
                         local::warm_pool_default::off, session::busy_state_dir::refuse);
  if (!s) return report_failure("reap", s.error());
  if (reusable) {
    auto n = (*s)->sweep_reusable(*s_value);
    if (!n) return report_failure("reap", n.error());
    std::cout << "deleted " << *n << '\n';
    return 0;
  }
  auto n = (*s)->sweep(*s_value);
  if (!n) return report_failure("reap", n.error());
  auto pending = (*s)->drain();
  std::cout << "deleted " << (*n - std::min(*n, pending)) << '\n';
  if (pending > 0) {
    std::cerr << "guestflow reap: " << pending << " guest(s) could not be deleted yet\n";
    return 1;
  }
  return 0;
}

const registrar reg{
    {"reap", "delete orphaned ephemeral guests, or idle reusable ones", usage, run_reap}};

} // namespace
} // namespace guestflow::cli
