#include "actors/artifact_archive.hpp"
#include "actors/component_spec.hpp"
#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"

#include <iostream>

namespace guestflow::cli {
namespace {

constexpr std::string_view usage =
    R"(usage: guestflow component --flow-id F --component-id C [--reuse flow|none]
                           [--allow-network] [--timeout S] [--memory-mb M] [--image NAME]
                           [--isolation KIND] [--return-files DIR] [--allow-truncated]
                           (--python FILE | -- CMD ARGS…)

Runs a Python program (--python, run with python3) or a command (after --, run as is) in a
guest, as Langflow's CreateOS Sandbox component does. Guest stdout goes to stdout, stderr to
stderr, and the exit status is the program's (124 when it ran past --timeout, 137 when it
ran out of memory as counted by the guest's memory cgroup; any other SIGKILL keeps 137 and
is said as `killed`); guestflow's own failures exit 125 with the reason on stderr. Output
cut at the control plane's cap is said on stderr and exits 125 unless --allow-truncated.

--reuse flow keeps one guest per (flow id, component id, network policy) across runs, so
installed packages and files carry over; the guest's name (gf-c-…) is the registry, so any
later invocation adopts it. A paused guest is resumed first; a guest whose egress was
changed behind guestflow's back is refused (egress_drift) and left alone. Changing
--allow-network gets a different guest. Reused guests are never deleted by a run: delete
idle ones with `guestflow reap --reusable --idle-longer-than S`. Off by default (none: a
fresh guest, deleted afterwards). --image NAME runs in that guest image
(CREATEOS_SANDBOX_ROOTFS; see guestflow image); another image gets another reused guest.
--isolation KIND runs it in that kind of guest: namespaces or gvisor (GUESTFLOW_ISOLATION;
refused, exit 125, where the control plane does not offer it).

--return-files DIR hands back what the program wrote under /workspace/artifacts (emptied
before each run): written under DIR (parents created, nothing outside DIR). The archive is
capped during the transfer at GUESTFLOW_ARTIFACT_CAP_BYTES (5 MiB); past it nothing comes
back and the run exits 125 with artifact_too_large after printing its output. Links,
devices and members escaping the directory are dropped and listed on stderr.)";

/// A guest-chosen path, printable on one line (control bytes escaped, UTF-8 kept).
std::string printable(const std::string& path) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char c : path) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\' || c == '\'') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "'";
}

int run_component(const std::vector<std::string>& argv) {
  signal_watch watch; // first: every thread created later inherits the blocked signals
  args a{{"flow-id", "component-id", "reuse", "timeout", "memory-mb", "return-files", "python",
          "image", "isolation"},
         {"allow-network", "allow-truncated"}};
  if (auto err = a.parse(argv)) {
    std::cerr << "guestflow component: " << *err << "\n" << usage << '\n';
    return 2;
  }
  if (!a.positionals().empty() || !a.has("flow-id") || !a.has("component-id") ||
      a.has("python") == !a.rest().empty()) {
    std::cerr << usage << '\n';
    return 2;
  }
  component_request req;
  req.flow_id = *a.get("flow-id");
  req.component_id = *a.get("component-id");
  if (auto r = a.get("reuse")) {
    auto mode = parse_reuse(*r);
    if (!mode) {
      std::cerr << "guestflow component: --reuse expects flow or none, got '" << *r << "'\n";
      return 2;
    }
    req.reuse = *mode;
  }
  auto env = cp::process_environment();
  if (auto t = a.get("timeout")) env["LANGFLOW_SANDBOX_TIMEOUT_SECONDS"] = *t;
  if (auto m = a.get("memory-mb")) env["LANGFLOW_SANDBOX_MEMORY_MB"] = *m;
  env["LANGFLOW_SANDBOX_ALLOW_NETWORK"] = a.has("allow-network") ? "true" : "false";
  if (auto image = a.get("image")) env["CREATEOS_SANDBOX_ROOTFS"] = *image;
  if (auto kind = a.get("isolation")) env["GUESTFLOW_ISOLATION"] = *kind;
  auto settings = policy::settings_from_env(env);
  if (!settings) return report_failure("component", settings.error());
  auto cap = artifact_cap_from_env(env);
  if (!cap) return report_failure("component", cap.error());
  if (auto p = a.get("python")) {
    auto program = read_bytes(*p);
    if (!program) return report_failure("component", program.error());
    req.python = std::move(*program);
  } else {
    req.argv = a.rest();
  }
  auto out_dir = a.get("return-files");
  req.return_files = out_dir.has_value();
  if (out_dir && out_dir->empty())
    return report_failure("component",
                          fail(ec::bad_request, "--return-files needs a directory"));

  auto s = session::open_admitted(env, watch, *settings); // a refused policy: no request
  if (!s) return report_failure("component", s.error());
  auto& sess = **s;
  auto catalog = sess.catalog();
  if (!catalog) return report_failure("component", catalog.error());
  auto plan = make_component_spec(req, *settings, sess.provider(), *catalog, sess.owner(), *cap,
                                  sess.rng());
  if (!plan) return report_failure("component", plan.error());
  auto report = sess.run(std::move(*plan));
  if (!report) return report_failure("component", report.error());
  const auto& r = report->result;
  std::cout << r.stdout_text << std::flush;
  std::cerr << r.stderr_text << std::flush;
  if (report->outcome == ec::killed)
    std::cerr << "guestflow component: killed: the program died of SIGKILL before its time "
                 "limit, and not by the memory limit\n";
  int status = report->outcome == ec::timeout         ? 124
               : r.exit_code < 0 || r.exit_code > 255 ? 125
                                                      : r.exit_code;
  status = status_after_cut("component", r.truncated, a.has("allow-truncated"), status);
  if (out_dir) {
    if (!report->files)
      return report_failure("component", fail(ec::guest_failed, "no files came back"));
    const auto& files = *report->files;
    for (const auto& d : files.dropped)
      std::cerr << "guestflow component: dropped " << printable(d.path) << ": " << d.reason
                << '\n';
    if (files.error) {
      auto f = *files.error;
      f.message += " (the program exited " + std::to_string(r.exit_code) + ")";
      return report_failure("component", f);
    }
    auto written = artifacts::write_under(*out_dir, files.files);
    if (!written) return report_failure("component", written.error());
  }
  return status;
}

const registrar reg{{"component",
                     "run a program in a guest that can be reused, with files handed back",
                     usage, run_component}};

} // namespace
} // namespace guestflow::cli
