#include "actors/code_spec.hpp"
#include "actors/guest_names.hpp"
#include "actors/output_relay.hpp"
#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "messages/run.hpp"

#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <caf/spawn_options.hpp>
#include <iostream>
#include <unistd.h>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage =
    R"(usage: guestflow code [--timeout S] [--memory-mb M] [--allow-network]
                      [--env K=V]... [--image NAME] [--isolation KIND] [--json] [--allow-truncated] FILE|-

Runs a Python program in a fresh guest (the sandbox-backend surface) and deletes the
guest afterwards, whatever happens. Guest stdout goes to stdout and stderr to stderr as the
program prints them, and the exit status is the program's (124 when it ran past --timeout,
137 when it ran out of memory, 130 when cancelled with Ctrl-C). --json prints lfx's
SandboxResult {stdout, stderr, exit_code, execution_time_ms} at the end instead, with
exit_code -1 for a timeout. 137 is a memory-cgroup OOM kill only when the control plane
counted one; any other SIGKILL (the program killed itself) keeps 137 and is said on
stderr as `killed`. guestflow's own failures (a refused policy, an unusable control plane)
exit 125 with the reason on stderr. Output is capped by the control plane (16 MiB of
stdout, 1 MiB of stderr on the local one): a cut output is said on stderr and in --json
(`"truncated": ["stdout"|"stderr"]`), and the run exits 125 unless --allow-truncated.
--image NAME runs it in that guest image (CREATEOS_SANDBOX_ROOTFS; see guestflow image).
--isolation KIND runs it in that kind of guest: namespaces or gvisor (GUESTFLOW_ISOLATION;
refused, exit 125, where the control plane does not offer it).

Flags override Langflow's settings from the environment: LANGFLOW_SANDBOX_TIMEOUT_SECONDS
(30), LANGFLOW_SANDBOX_MEMORY_MB (192, a floor), LANGFLOW_SANDBOX_ALLOW_NETWORK (false),
LANGFLOW_SANDBOX_ALLOWED_DOMAINS (refused).)";

int run_code(const std::vector<std::string>& argv) {
  signal_watch watch; // first: every thread created later inherits the blocked signals
  args a{{"timeout", "memory-mb", "env", "image", "isolation"},
         {"allow-network", "json", "allow-truncated"}};
  if (auto err = a.parse(argv)) {
    std::cerr << "guestflow code: " << *err << "\n" << usage << '\n';
    return 2;
  }
  if (a.positionals().size() != 1) {
    std::cerr << usage << '\n';
    return 2;
  }
  auto env = cp::process_environment();
  if (auto t = a.get("timeout")) env["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"] = *t;
  if (auto m = a.get("memory-mb")) env["LANGFLOW_SANDBOX_MEMORY_MB"] = *m;
  if (a.has("allow-network")) env["LANGFLOW_SANDBOX_ALLOW_NETWORK"] = "true";
  if (auto image = a.get("image")) env["CREATEOS_SANDBOX_ROOTFS"] = *image;
  if (auto kind = a.get("isolation")) env["GUESTFLOW_ISOLATION"] = *kind;
  auto settings = policy::settings_from_env(env);
  if (!settings) return report_failure("code", settings.error());
  code_request req;
  for (const auto& kv : a.all("env")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return report_failure("code",
                            fail(ec::bad_request, "--env expects K=V, got '" + kv + "'"));
    req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto program = read_bytes(a.positionals()[0]);
  if (!program) return report_failure("code", program.error());
  req.code = std::move(*program);
  auto s = session::open_admitted(env, watch, *settings); // a refused policy: no request
  if (!s) return report_failure("code", s.error());
  auto& sess = **s;
  auto catalog = sess.catalog();
  if (!catalog) return report_failure("code", catalog.error());
  auto name = names::ephemeral(names::guest_kind::backend, sess.owner(), sess.rng());
  auto spec = make_code_spec(req, *settings, sess.provider(), *catalog, name, sess.rng());
  if (!spec) return report_failure("code", spec.error());
  if (a.has("json")) {
    auto report = sess.run(std::move(*spec));
    if (!report) return report_failure("code", report.error());
    std::cout << encode(sandbox_result_of(*report)) << std::endl;
    return status_after_cut("code", report->result.truncated, a.has("allow-truncated"), 0);
  }
  // Live: the guest's output reaches the terminal as it is printed.
  std::cout.flush();
  auto& sys = sess.rt().system();
  auto relay = sys.spawn<caf::detached>(output_relay, STDOUT_FILENO, STDERR_FILENO);
  auto report = sess.run(std::move(*spec), relay);
  {
    caf::scoped_actor self{sys};
    self->request(relay, std::chrono::seconds{60}, drain_atom::value)
        .receive([](bool) {}, [](caf::error&) {});
  }
  caf::anon_send_exit(relay, caf::exit_reason::user_shutdown);
  if (!report) return report_failure("code", report.error());
  const auto& r = report->result;
  if (report->outcome == ec::killed)
    std::cerr << "guestflow code: killed: the program died of SIGKILL before its time limit, "
                 "and not by the memory limit\n";
  int status = report->outcome == ec::timeout         ? 124
               : r.exit_code < 0 || r.exit_code > 255 ? 125
                                                      : r.exit_code;
  return status_after_cut("code", r.truncated, a.has("allow-truncated"), status);
}

const registrar reg{{"code", "run a Python program in a fresh guest", usage, run_code}};

} // namespace
} // namespace guestflow::cli
