#include "apps/args.hpp"
#include "apps/cli_session.hpp"
#include "apps/command.hpp"
#include "apps/embedded_start.hpp"
#include "apps/signal_watch.hpp"
#include "controlplane/client/client.hpp"
#include "controlplane/client/endpoint_selection.hpp"
#include "controlplane/local/embedded.hpp"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <spdlog/spdlog.h>
#include <sstream>

namespace guestflow::cli {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view usage =
    R"(usage: guestflow image add NAME (--rootfs PATH | --python-env PREFIX) [--preload M,…]
                             [--snapshot]
       guestflow image ls [--json]
       guestflow image rm NAME

Guest images of the local control plane: what a create's `rootfs` (CREATEOS_SANDBOX_ROOTFS,
CREATEOS_EXECUTOR_ROOTFS) names. `debian:12`, the host's /usr, is built in.

  add NAME --rootfs PATH       a root file system: a tar (plain, gzip, xz, zstd or bzip2)
                               or a directory (e.g. `docker export`, `mmdebstrap`). It is
                               copied into the state dir; the guest sees it read-only as
                               its / (own /usr, /bin, /lib, /etc), plus /proc, /dev, a
                               private /tmp and its writable /workspace. Absolute member
                               paths are made relative; `..`, members below a symlink,
                               hard links to anything but an earlier file and sparse files
                               are refused; device nodes and FIFOs are dropped (listed);
                               setuid/setgid bits are stripped; every file is made readable
                               by the guest.
  add NAME --python-env PREFIX a Python environment of this host (e.g. Langflow's venv):
                               the guest keeps the host's /usr and gets PREFIX — and a
                               venv's base interpreter outside /usr — read-only at the same
                               path, PREFIX/bin first on its PATH (so `python3` is the
                               environment's). Nothing is copied: the guest sees PREFIX as
                               it is when the guest starts.
  add … --preload M1,M2        Python modules (e.g. pandas,numpy) a warm-pool guest of this
                               image imports before it is taken, so that the first
                               `python3` run in it starts with them loaded. The entry
                               guestflow:runner marks an image whose guests run flows: the
                               runner's engine (lfx when the image has it) is imported too.
                               A module that does not import is logged once and left out.
                               The built-in image takes GUESTFLOW_PRELOAD (same syntax) of
                               the control plane's environment.
  add … --snapshot             also boot a gVisor guest of the image, import the preload in
                               a python3 and checkpoint the sandbox: a create of the image
                               with isolation gvisor restores a copy of that snapshot
                               instead of booting (memory, the imported modules included),
                               and its first `python3` run is served by that interpreter.
  ls [--json]                  name, kind, size, creation time, source and preload of every
                               image
  rm NAME                      removes an image; refused while a guest that is not deleted
                               uses it (the guests are named)

NAME: 1-64 characters of [a-z0-9._:-], starting with a letter or digit. Images live in
the control plane's state dir (GUESTFLOW_STATE_DIR for the embedded one) and survive
restarts. With GUESTFLOW_CONTROL_PLANE_URL the command goes to that control plane (paths
are of its host); CreateOS has its own templates and is refused (unavailable).
Exit status: 0 done, 2 bad input (bad_request), 130 interrupted, 125 other failures.)";

/// A client call's answer, or a signal's cancellation, whichever comes first.
template<class T>
class answer {
public:
  void set(result<T> r) {
    std::lock_guard<std::mutex> lock{mu_};
    if (!value_) value_.emplace(std::move(r));
    cv_.notify_all();
  }
  result<T> wait() {
    std::unique_lock<std::mutex> lock{mu_};
    cv_.wait(lock, [this] { return value_.has_value(); });
    return std::move(*value_);
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<result<T>> value_;
};

/// The control plane the command talks to: configured, or the embedded one on the state dir.
struct target {
  std::unique_ptr<local::embedded_control_plane> embedded;
  std::shared_ptr<cp::client> client;
};

result<target> open_target(signal_watch& watch) {
  auto env = cp::process_environment();
  spdlog::set_level(env.count("GUESTFLOW_DEBUG") ? spdlog::level::debug : spdlog::level::warn);
  auto choice = cp::select_endpoint(env);
  if (!choice) return choice.error();
  target t;
  cp::endpoint ep;
  if (std::holds_alternative<cp::endpoint>(*choice)) {
    ep = std::get<cp::endpoint>(*choice);
  } else {
    auto dir = state_dir(env);
    local::serve_options opts;
    opts.state_dir = dir;
    auto started = start_embedded(
        std::move(opts), waiting_notice(watch, dir),
        fail(ec::cancelled, "cancelled while waiting for another guestflow using " + dir));
    if (!started) return started.error();
    t.embedded = std::move(*started);
    ep.base_url = t.embedded->unix_url().empty() ? t.embedded->url() : t.embedded->unix_url();
    ep.kind = cp::provider::local;
  }
  auto client = cp::client::make(ep);
  if (!client) return client.error();
  t.client = std::move(*client);
  return t;
}

/// Runs one client call to its answer; SIGINT/SIGTERM end the wait with `cancelled`.
template<class T, class Start>
result<T> call(signal_watch& watch, Start&& start) {
  auto a = std::make_shared<answer<T>>();
  watch.on_signal([a](int) { a->set(fail(ec::cancelled, "interrupted")); });
  start([a](result<T> r) { a->set(std::move(r)); });
  auto r = a->wait();
  watch.on_signal({});
  return r;
}

int failed(const failure& f) {
  report_failure("image", f);
  if (f.code == ec::bad_request) return 2;
  return exit_status(f.code);
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items)
    out += (out.empty() ? "" : ",") + i;
  return out;
}

std::string human_size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) {
    v /= 1024;
    ++u;
  }
  std::ostringstream out;
  if (u == 0)
    out << bytes << " B";
  else
    out << std::fixed << std::setprecision(1) << v << ' ' << units[u];
  return out.str();
}

/// --preload's comma-separated modules (blanks around each ignored).
std::vector<std::string> preload_list(const args& a) {
  std::vector<std::string> out;
  std::stringstream in{a.get("preload").value_or("")};
  for (std::string item; std::getline(in, item, ',');) {
    auto b = item.find_first_not_of(" \t");
    if (b != std::string::npos)
      out.push_back(item.substr(b, item.find_last_not_of(" \t") + 1 - b));
  }
  return out;
}

int run_add(signal_watch& watch, target& t, const std::string& name, const args& a) {
  image_add_request req;
  req.name = name;
  auto absolute = [](const std::string& p) {
    std::error_code ec_;
    auto abs = std::filesystem::absolute(p, ec_);
    return (ec_ ? std::filesystem::path{p} : abs).lexically_normal().string();
  };
  if (auto r = a.get("rootfs")) req.rootfs = absolute(*r);
  if (auto p = a.get("python-env")) req.python_env = absolute(*p);
  req.preload = preload_list(a);
  req.snapshot = a.has("snapshot");
  auto added = call<image_added>(
      watch, [&](auto cb) { t.client->add_image(req, std::chrono::hours{6}, std::move(cb)); });
  if (!added) {
    if (added.error().code == ec::cancelled && t.embedded) {
      // The import goes on in this process's server, which would wait for it: leave now;
      // the next start removes the unfinished import.
      std::cerr << "guestflow image: interrupted; the unfinished import is removed on the "
                   "next start\n";
      std::fflush(nullptr);
      std::_Exit(130);
    }
    return failed(added.error());
  }
  const auto& i = added->image;
  std::cout << "added " << i.name << ": " << i.kind << ", " << human_size(i.size_bytes)
            << ", from " << i.source;
  if (!i.preload.empty()) std::cout << ", preload " << joined(i.preload);
  if (i.snapshot) std::cout << ", gVisor snapshot";
  std::cout << '\n';
  if (added->dropped_total > 0) {
    std::cerr << "guestflow image: " << added->dropped_total
              << " member(s) left out (the guest gets its own /dev):\n";
    for (const auto& d : added->dropped)
      std::cerr << "  " << d << '\n';
    if (added->dropped_total > added->dropped.size())
      std::cerr << "  … and " << added->dropped_total - added->dropped.size() << " more\n";
  }
  return 0;
}

int run_ls(signal_watch& watch, target& t, bool json) {
  auto list = call<image_list>(
      watch, [&](auto cb) { t.client->images(std::chrono::seconds{30}, std::move(cb)); });
  if (!list) return failed(list.error());
  if (json) {
    std::cout << encode(*list) << '\n';
    return 0;
  }
  size_t w_name = 4, w_kind = 4;
  for (const auto& i : list->data) {
    w_name = std::max(w_name, i.name.size());
    w_kind = std::max(w_kind, i.kind.size());
  }
  size_t w_source = 6;
  for (const auto& i : list->data)
    w_source = std::max(w_source, i.source.size());
  auto row = [&](const std::string& n, const std::string& k, const std::string& s,
                 const std::string& c, const std::string& src, const std::string& pre) {
    std::cout << std::left << std::setw(int(w_name) + 2) << n << std::setw(int(w_kind) + 2) << k
              << std::setw(11) << s << std::setw(26) << c << std::setw(int(w_source) + 2) << src
              << pre << '\n';
  };
  row("NAME", "KIND", "SIZE", "CREATED", "SOURCE", "PRELOAD");
  for (const auto& i : list->data)
    row(i.name, i.kind, i.kind == image_kind_builtin ? "-" : human_size(i.size_bytes),
        i.created_at.empty() ? "-" : i.created_at, i.source,
        (i.preload.empty() ? "-" : joined(i.preload)) + (i.snapshot ? " (snapshot)" : ""));
  return 0;
}

int run_rm(signal_watch& watch, target& t, const std::string& name) {
  auto removed = call<image_removed>(watch, [&](auto cb) {
    t.client->remove_image(name, std::chrono::minutes{30}, std::move(cb));
  });
  if (!removed) return failed(removed.error());
  std::cout << "removed " << removed->name << '\n';
  return 0;
}

int bad_usage(const std::string& why) {
  std::cerr << "guestflow image: " << why << "\n" << usage << '\n';
  return 2;
}

int run_image(const std::vector<std::string>& argv) {
  signal_watch watch;
  if (argv.empty()) return bad_usage("a subcommand is required: add, ls or rm");
  const auto& sub = argv.front();
  std::vector<std::string> rest{argv.begin() + 1, argv.end()};
  args a{{"rootfs", "python-env", "preload"}, {"json", "snapshot"}};
  if (auto err = a.parse(rest)) return bad_usage(*err);
  const auto& pos = a.positionals();
  if (sub == "add") {
    if (pos.size() != 1) return bad_usage("image add takes one NAME");
    if (a.has("rootfs") == a.has("python-env"))
      return bad_usage("image add takes exactly one of --rootfs PATH and --python-env PREFIX");
    if (a.has("json")) return bad_usage("--json goes with image ls");
    if (auto problem = image_name_problem(pos[0]); !problem.empty())
      return failed(fail(ec::bad_request, problem));
    if (auto preload = canonical_preload(preload_list(a)); !preload)
      return failed(preload.error());
  } else if (a.has("snapshot")) {
    return bad_usage("--snapshot goes with image add");
  } else if (sub == "ls") {
    if (!pos.empty() || a.has("rootfs") || a.has("python-env") || a.has("preload"))
      return bad_usage("image ls takes no arguments but --json");
  } else if (sub == "rm") {
    if (pos.size() != 1 || a.has("rootfs") || a.has("python-env") || a.has("preload") ||
        a.has("json"))
      return bad_usage("image rm takes one NAME");
  } else {
    return bad_usage("unknown subcommand '" + sub + "'; use add, ls or rm");
  }
  auto t = open_target(watch);
  if (!t) return failed(t.error());
  if (sub == "add") return run_add(watch, *t, pos[0], a);
  if (sub == "ls") return run_ls(watch, *t, a.has("json"));
  return run_rm(watch, *t, pos[0]);
}

const registrar reg{{"image", "add, list and remove guest images of the local control plane",
                     usage, run_image}};

} // namespace
} // namespace guestflow::cli
