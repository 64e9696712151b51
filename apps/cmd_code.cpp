#include "actors/code_spec.hpp"
#include "actors/guest_names.hpp"
#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "messages/run.hpp"

#include <iostream>
#include <iterator>
#include <sstream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage = R"(usage: guestflow code [--timeout S] [--memory-mb M] [--allow-network]
                      [--env K=V]... [--json] FILE|-

Runs a Python program in a fresh guest (the sandbox-backend surface) and deletes the
guest afterwards, whatever happens. Guest stdout goes to stdout, stderr to stderr, and the
exit status is the program's (124 when it ran past --timeout, 137 when it ran out of
memory). --json prints lfx's SandboxResult {stdout, stderr, exit_code, execution_time_ms}
instead, with exit_code -1 for a timeout. guestflow's own failures (a refused policy, an
unusable control plane) exit 125 with the reason on stderr.

Flags override Langflow's settings from the environment: LANGFLOW_SANDBOX_TIMEOUT_SECONDS
(30), LANGFLOW_SANDBOX_MEMORY_MB (192, a floor), LANGFLOW_SANDBOX_ALLOW_NETWORK (false),
LANGFLOW_SANDBOX_ALLOWED_DOMAINS (refused).)";

/// FILE, or standard input for "-".
result<std::string> read_program(const std::string& path) {
  if (path != "-")
    return read_bytes(path);
  std::ostringstream buf;
  buf << std::cin.rdbuf();
  return buf.str();
}

int run_code(const std::vector<std::string>& argv) {
  signal_watch watch; // first: every thread created later inherits the blocked signals
  args a{{"timeout", "memory-mb", "env"}, {"allow-network", "json"}};
  if (auto err = a.parse(argv)) {
    std::cerr << "guestflow code: " << *err << "\n" << usage << '\n';
    return 2;
  }
  if (a.positionals().size() != 1) {
    std::cerr << usage << '\n';
    return 2;
  }
  auto env = cp::process_environment();
  if (auto t = a.get("timeout"))
    env["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"] = *t;
  if (auto m = a.get("memory-mb"))
    env["LANGFLOW_SANDBOX_MEMORY_MB"] = *m;
  if (a.has("allow-network"))
    env["LANGFLOW_SANDBOX_ALLOW_NETWORK"] = "true";
  auto settings = policy::settings_from_env(env);
  if (!settings)
    return report_failure("code", settings.error());
  code_request req;
  for (const auto& kv : a.all("env")) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return report_failure("code", fail(ec::bad_request, "--env expects K=V, got '" + kv + "'"));
    req.env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  auto program = read_program(a.positionals()[0]);
  if (!program)
    return report_failure("code", program.error());
  req.code = std::move(*program);
  auto s = session::open(env, watch);
  if (!s)
    return report_failure("code", s.error());
  auto& sess = **s;
  if (auto gate = policy::admit(*settings, sess.provider()); !gate)
    return report_failure("code", gate.error()); // refused before any request is made
  auto catalog = sess.catalog();
  if (!catalog)
    return report_failure("code", catalog.error());
  auto name = names::ephemeral(names::guest_kind::backend, sess.owner(), sess.rng());
  auto spec = make_code_spec(req, *settings, sess.provider(), *catalog, name, sess.rng());
  if (!spec)
    return report_failure("code", spec.error());
  auto report = sess.run(std::move(*spec));
  if (!report)
    return report_failure("code", report.error());
  const auto& r = report->result;
  if (a.has("json")) {
    sandbox_result out{r.stdout_text, r.stderr_text, r.exit_code, r.exec_ms};
    std::cout << encode(out) << std::endl;
    return 0;
  }
  std::cout << r.stdout_text << std::flush;
  std::cerr << r.stderr_text << std::flush;
  if (report->outcome == ec::timeout)
    return 124;
  return r.exit_code < 0 || r.exit_code > 255 ? 125 : r.exit_code;
}

const registrar reg{{"code", "run a Python program in a fresh guest", usage, run_code}};

} // namespace
} // namespace guestflow::cli
