#include "controlplane/local/serve.hpp"

#include "common/fd_limit.hpp"
#include "controlplane/local/fleet_owners.hpp"
#include "controlplane/local/guests/workspace_disk.hpp"
#include "controlplane/local/http/http_server.hpp"
#include "controlplane/local/images/image_store.hpp"
#include "controlplane/local/service/auto_pause.hpp"
#include "controlplane/local/service/shapes.hpp"
#include "controlplane/local/service/simulated_control_plane.hpp"
#include "controlplane/local/store/reconciler.hpp"
#include "controlplane/local/store/record_store.hpp"
#include "controlplane/local/store/state_lock.hpp"
#include "fleet/node_registrar.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/signal_set.hpp>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

namespace guestflow::local {

namespace net = boost::asio;
using tcp = net::ip::tcp;

result<net_address> parse_listen(const std::string& listen) {
  std::string why;
  auto a = parse_host_port(listen, &why);
  if (!a) return fail(ec::bad_request, "--listen: " + why);
  return *a;
}

namespace {

/// The control plane's own stderr logger; the default logger belongs to the host process
/// (the CLI prints results on stdout when the control plane is embedded).
spdlog::logger& log() {
  static auto logger = [] {
    if (auto existing = spdlog::get("control-plane")) return existing;
    return spdlog::stderr_color_mt("control-plane");
  }();
  return *logger;
}

/// The canned stdout of simulated execs: a whole, regular file of at most 16 MiB (the
/// default stdout cap of one exec).
result<std::string> read_small_file(const std::filesystem::path& p) {
  constexpr uintmax_t cap = uintmax_t{16} << 20;
  std::error_code ec_size;
  auto size = std::filesystem::file_size(p, ec_size);
  if (ec_size)
    return fail(ec::bad_request, "--simulate-exec-stdout: cannot read '" + p.string() +
                                     "': " + ec_size.message());
  if (size > cap)
    return fail(ec::bad_request, "--simulate-exec-stdout: '" + p.string() + "' is over " +
                                     std::to_string(cap) + " bytes");
  std::ifstream in{p, std::ios::binary};
  std::string text(static_cast<size_t>(size), '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    return fail(ec::bad_request, "--simulate-exec-stdout: cannot read '" + p.string() + "'");
  return text;
}

std::chrono::milliseconds sweep_period(double scale) {
  auto ms = static_cast<long>(1000.0 * scale);
  return std::chrono::milliseconds{std::clamp(ms, 20L, 1000L)};
}

/// How often ended guests' records are looked at: a quarter of the retention, between
/// 1 s and 1 min (a record outlives its retention by at most that).
std::chrono::milliseconds prune_period(std::chrono::seconds retention) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(retention).count() / 4;
  return std::chrono::milliseconds{std::clamp<long long>(ms, 1000, 60'000)};
}

/// The budget and the warm pool's targets, checked against each other: a pool that alone
/// does not fit would make every create refused.
result<capacity_limits> resolve_capacity(const control_plane_config& cfg) {
  auto limits = cfg.capacity;
  if (limits.memory_budget_mib == 0) {
    auto budget = default_memory_budget_mib();
    if (!budget || *budget == 0)
      return fail(ec::unavailable, "cannot read MemTotal from /proc/meminfo for the default "
                                   "memory budget; pass --memory-budget-mb N");
    limits.memory_budget_mib = *budget;
  }
  uint64_t pool_mib = 0, pool_guests = 0;
  for (const auto& t : cfg.warm_pool) {
    if (auto shp = find_shape(t.key.shape)) pool_mib += shp->mem_mib * t.count;
    pool_guests += t.count;
  }
  if (pool_mib > limits.memory_budget_mib || pool_guests > limits.max_guests)
    return fail(ec::bad_request, "--warm-pool: its " + std::to_string(pool_guests) +
                                     " guests commit " + std::to_string(pool_mib) +
                                     " MiB, more than this node holds (" +
                                     std::to_string(limits.memory_budget_mib) + " MiB, " +
                                     std::to_string(limits.max_guests) +
                                     " guests: --memory-budget-mb, --max-guests)");
  return limits;
}

/// The control plane as a fleet member: its record is its capacity plus the advertise URL,
/// its changes are its capacity gate's, and a fence closes that gate.
class fleet_member final : public fleet::registered_node {
public:
  fleet_member(control_plane& domain, std::string url)
      : domain_(domain)
      , url_(std::move(url)) {}

  std::string record() override {
    auto c = domain_.capacity();
    return encode_capacity(*c, url_);
  }
  uint64_t wait_change(uint64_t seen, std::chrono::steady_clock::time_point until) override {
    return domain_.gate().wait_change(seen, until);
  }
  void wake() override { domain_.gate().wake(); }
  void set_ready(bool ready) override {
    domain_.gate().set_ready(ready);
    // Fenced, its lease may expire and another node take its shared guests over: they stop
    // here first. Registered again: what another node took over meanwhile is forgotten.
    if (ready)
      domain_.forget_taken_over();
    else
      domain_.stop_shared();
  }

private:
  control_plane& domain_;
  std::string url_;
};

/// `--fleet`'s etcd client, after its flags are checked; nullptr without a fleet.
result<std::shared_ptr<fleet::etcd_client>> fleet_client(const serve_options& opts) {
  if (opts.fleet.etcd.empty()) return std::shared_ptr<fleet::etcd_client>{};
  if (opts.simulate_latency_ms)
    return fail(ec::bad_request, "--fleet needs real guests (not --simulate-latency-ms)");
  if (opts.fleet.ttl < std::chrono::seconds{2} || opts.fleet.ttl > std::chrono::seconds{3600})
    return fail(ec::bad_request, "--fleet-ttl-seconds: expected an integer in 2..3600, got " +
                                     std::to_string(opts.fleet.ttl.count()));
  const auto& url = opts.fleet.advertise;
  auto scheme_end = url.find("://");
  if (!url.empty() &&
      (scheme_end == std::string::npos || scheme_end + 3 == url.size() ||
       (url.compare(0, scheme_end, "http") != 0 && url.compare(0, scheme_end, "https") != 0)))
    return fail(ec::bad_request,
                "--advertise: expected the http:// or https:// URL runtimes reach this node "
                "at, got '" +
                    url + "'");
  auto client = fleet::etcd_client::make(opts.fleet.etcd);
  if (!client) return fail(ec::bad_request, "--fleet: " + client.error().message);
  return *client;
}

/// `--workspace-root`: an existing, writable directory (probed by creating a file), made
/// absolute; typed errors at start-up rather than at the first persistent create.
result<std::filesystem::path> check_workspace_root(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::error_code ec_;
  auto st = fs::status(root, ec_);
  if (!fs::exists(st))
    return fail(ec::bad_request, "--workspace-root: " + root.string() + " does not exist");
  if (!fs::is_directory(st))
    return fail(ec::bad_request, "--workspace-root: " + root.string() + " is not a directory");
  auto abs = fs::canonical(root, ec_);
  if (ec_)
    return fail(ec::unavailable, "--workspace-root: " + root.string() + ": " + ec_.message());
  auto probe = abs / (".guestflow-probe-" + std::to_string(::getpid()));
  std::ofstream out{probe};
  if (!out)
    return fail(ec::unavailable, "--workspace-root: " + abs.string() +
                                     " is not writable: " + std::strerror(errno));
  out.close();
  fs::remove(probe, ec_);
  return abs;
}

} // namespace

struct server_instance::impl {
  // Declaration order is teardown order reversed: sessions (owned by io) go before the
  // domain they call, the domain before the backend and store it uses.
  std::optional<state_lock> lock;
  std::unique_ptr<guest_backend> backend;
  std::unique_ptr<record_store> store;
  std::unique_ptr<image_store> images;
  std::unique_ptr<sandbox_service> service;
  control_plane* domain =
      nullptr; ///< `service` when it is the real one (the warm pool's owner)
  net::thread_pool workers;
  net::io_context io{1};
  std::optional<http_server> server;
  std::optional<auto_pause_timer> auto_pause;
  std::optional<net::steady_timer> prune_timer; ///< real guests only
  std::chrono::milliseconds prune_every{60'000};
  bool pruning = false;
  std::optional<net::signal_set> signals;
  std::string url;
  std::string unix_url;
  std::optional<std::filesystem::path> unix_socket; ///< removed when the instance goes
  uint16_t port = 0;
  std::atomic<bool> stopping{false};
  // Last: stopped (its thread joined) before the domain it watches goes.
  std::unique_ptr<fleet_member> member;
  std::unique_ptr<fleet::node_registrar> registrar;
  std::shared_ptr<fleet_owners> owners; ///< with --workspace-root

  explicit impl(unsigned threads)
      : workers(std::max(1u, threads)) {}
  ~impl() {
    if (unix_socket) ::unlink(unix_socket->c_str());
  }
};

/// Prunes ended guests' records on a worker thread every impl::prune_every, never twice
/// at once.
void server_instance::arm_prune(impl& m) {
  if (!m.prune_timer) return;
  m.prune_timer->expires_after(m.prune_every);
  m.prune_timer->async_wait([&m](boost::system::error_code ec) {
    if (ec || m.stopping) return;
    if (!m.pruning) {
      m.pruning = true;
      net::post(m.workers, [&m] {
        if (auto n = m.domain->prune_destroyed())
          log().info("pruned the records of {} sandboxes destroyed more than the retention "
                     "ago",
                     n);
        net::post(m.io, [&m] { m.pruning = false; });
      });
    }
    arm_prune(m);
  });
}

server_instance::server_instance(std::unique_ptr<impl> i)
    : impl_(std::move(i)) {}

server_instance::~server_instance() {
  stop();
  impl_->workers.join();
}

const std::string& server_instance::url() const noexcept {
  return impl_->url;
}

const std::string& server_instance::unix_url() const noexcept {
  return impl_->unix_url;
}

uint16_t server_instance::port() const noexcept {
  return impl_->port;
}

result<std::unique_ptr<server_instance>> server_instance::start(const serve_options& opts) {
  auto address = parse_listen(opts.listen);
  if (!address) return address.error();
  if (!address->loopback && opts.http.api_key.empty())
    return fail(ec::policy_refused, "refusing to listen on non-loopback address " +
                                        address->host +
                                        " without an API key; pass --api-key KEY or set "
                                        "GUESTFLOW_CONTROL_PLANE_KEY, or listen on 127.0.0.1");
  if (!opts.simulate_latency_ms && opts.state_dir.empty())
    return fail(ec::bad_request, "--state-dir DIR is required");
  if (opts.unix_socket && (!opts.unix_socket->is_absolute() ||
                           opts.unix_socket->string().size() > max_unix_socket_path))
    return fail(ec::bad_request, "--unix-socket: expected an absolute path of at most " +
                                     std::to_string(max_unix_socket_path) + " bytes, got '" +
                                     opts.unix_socket->string() + "'");
  if (!opts.domain.node.empty())
    if (auto node = parse_node_name(opts.domain.node, "--node"); !node) return node.error();
  auto etcd = fleet_client(opts);
  if (!etcd) return etcd.error();
  std::filesystem::path workspace_root;
  if (!opts.domain.workspace_root.empty()) {
    if (!*etcd)
      return fail(ec::bad_request, "--workspace-root needs --fleet etcd://HOST:PORT (a "
                                   "shared workspace is owned through the fleet's leases)");
    auto root = check_workspace_root(opts.domain.workspace_root);
    if (!root) return root.error();
    workspace_root = *root;
  }
  if (opts.simulate_exec_stdout && !opts.simulate_latency_ms)
    return fail(ec::bad_request, "--simulate-exec-stdout needs --simulate-latency-ms N");
  std::string canned_stdout;
  if (opts.simulate_exec_stdout) {
    auto text = read_small_file(*opts.simulate_exec_stdout);
    if (!text) return text.error();
    canned_stdout = std::move(*text);
  }
  ::signal(SIGPIPE, SIG_IGN);

  auto m = std::make_unique<impl>(opts.workers);
  std::vector<acceptor> acceptors;
  try {
    if (!opts.simulate_latency_ms) {
      std::filesystem::create_directories(opts.state_dir);
      // Others may traverse (guests run as an unprivileged uid and their workspaces live
      // below) but not list; the records file itself is 0600.
      ::chmod(opts.state_dir.c_str(), 0711);
      auto l = state_lock::acquire(opts.state_dir);
      if (!l) return l.error();
      m->lock.emplace(std::move(*l));
    }
    acceptors.push_back(
        listen_on(m->io, tcp::endpoint{net::ip::make_address(address->host), address->port}));
  } catch (const std::exception& e) {
    return fail(ec::unavailable, "cannot listen on " + opts.listen + ": " + e.what());
  }
  auto port = bound_port(acceptors.front());
  if (opts.unix_socket) {
    auto path = opts.unix_socket->string();
    try {
      acceptors.push_back(listen_unix(m->io, path));
    } catch (const std::exception& e) {
      return fail(ec::unavailable, "cannot listen on Unix socket " + path + ": " + e.what());
    }
    m->unix_socket = *opts.unix_socket;
    m->unix_url = "unix://" + path;
  }

  if (opts.simulate_latency_ms) {
    m->service = std::make_unique<simulated_control_plane>(
        std::chrono::milliseconds{*opts.simulate_latency_ms}, std::move(canned_stdout));
    log().warn("simulated control plane ({} ms per call): no guest is ever started",
               *opts.simulate_latency_ms);
  } else {
    try {
      backend_config cfg;
      cfg.state_dir = opts.state_dir;
      cfg.protected_ports = {port};
      cfg.workspace_root = workspace_root;
      if (opts.nft_path) cfg.nft = *opts.nft_path;
      auto pool = workspace_pool_from(std::getenv("GUESTFLOW_WORKSPACE_POOL"));
      if (!pool) return pool.error();
      cfg.workspace_pool = *pool;
      m->backend = std::make_unique<guest_backend>(cfg);
    } catch (const std::exception& e) {
      return fail(ec::unavailable, std::string{"guest backend unavailable: "} + e.what());
    }
    auto store = record_store::open(opts.state_dir / "control-plane.db");
    if (!store) return store.error();
    m->store = std::move(*store);
    auto report = reconcile(*m->store, *m->backend);
    if (!report) return report.error();
    log().info("reconciled {} records: {} adopted, {} reaped, {} guests' cgroups no record "
               "named removed",
               report->records.size(), report->adopted, report->reaped, report->stray_cgroups);
    for (const auto& p : report->problems)
      log().warn("reconcile: {}", p);
    std::vector<std::string> image_problems;
    auto images = image_store::open(opts.state_dir, image_problems);
    if (!images) return images.error();
    m->images = std::move(*images);
    for (const auto& p : image_problems)
      log().warn("{}", p);
    auto domain_cfg = opts.domain;
    domain_cfg.warm_pool.clear();
    for (const auto& t : opts.domain.warm_pool) {
      if (auto image = m->images->resolve(t.key.image); !image) {
        // A default pool (serve's executor guest) is dropped: its runs fail the same way.
        if (t.optional) {
          log().warn("warm pool {}: dropped: {}", to_string(t.key), image.error().message);
          continue;
        }
        return fail(ec::bad_request,
                    "--warm-pool: " + to_string(t.key) + ": " + image.error().message);
      }
      domain_cfg.warm_pool.push_back(t);
    }
    domain_cfg.warn = [](const std::string& what) { log().warn("{}", what); };
    domain_cfg.workspace_root = workspace_root;
    if (!workspace_root.empty()) {
      m->owners = std::make_shared<fleet_owners>(
          *etcd, opts.domain.node.empty() ? host_node_name() : opts.domain.node);
      domain_cfg.owners = m->owners;
      domain_cfg.hang_limit =
          std::chrono::duration_cast<std::chrono::milliseconds>(opts.fleet.ttl) / 3;
    }
    auto limits = resolve_capacity(domain_cfg);
    if (!limits) return limits.error();
    domain_cfg.capacity = *limits;
    if (!domain_cfg.warm_pool.empty() || !report->pooled.empty())
      log().info("warm pool {} ({} guests adopted)", to_string(domain_cfg.warm_pool),
                 report->pooled.size());
    auto domain =
        std::make_unique<control_plane>(*m->backend, *m->store, *m->images, domain_cfg,
                                        std::move(report->records), std::move(report->pooled));
    m->domain = domain.get();
    m->service = std::move(domain);
    log().info("capacity of node {}: {} MiB, {} guests", m->domain->gate().node(),
               limits->memory_budget_mib, limits->max_guests);
    m->prune_timer.emplace(m->io);
    m->prune_every = prune_period(opts.domain.destroyed_retention);
  }

  m->server.emplace(m->io, m->workers, *m->service, opts.http, std::move(acceptors));
  m->auto_pause.emplace(m->io, m->workers, *m->service,
                        sweep_period(opts.domain.auto_pause_scale));
  m->server->start();
  m->auto_pause->start();
  arm_prune(*m);
  m->url = "http://" + address->url_host() + ":" + std::to_string(port);
  m->port = port;
  if (*etcd) {
    m->member = std::make_unique<fleet_member>(
        *m->domain, opts.fleet.advertise.empty() ? m->url : opts.fleet.advertise);
    fleet::registrar_settings rs;
    rs.node = m->domain->gate().node();
    rs.ttl = opts.fleet.ttl;
    rs.info = [](const std::string& what) { log().info("{}", what); };
    rs.warn = [](const std::string& what) { log().warn("{}", what); };
    m->registrar = std::make_unique<fleet::node_registrar>(*etcd, *m->member, std::move(rs));
    if (m->owners) m->owners->attach(m->registrar.get());
    m->registrar->start();
  }
  return std::unique_ptr<server_instance>{new server_instance(std::move(m))};
}

void server_instance::stop_on_signals() {
  impl_->signals.emplace(impl_->io, SIGINT, SIGTERM);
  impl_->signals->async_wait([this](boost::system::error_code ec, int sig) {
    if (ec) return;
    log().info("signal {}: stopping (guests keep running; warm-pool guests are deleted)", sig);
    stop();
  });
}

void server_instance::run() {
  impl_->io.run();
  // Shared guests stop before the lease goes (with it their ownership: another node may
  // take them over at once). Out of placement first (its lease revoked), then the rest.
  if (impl_->owners && impl_->domain) impl_->domain->stop_shared();
  if (impl_->registrar) impl_->registrar->stop();
  impl_->workers.join(); // pending kills and reaps finish; their replies go nowhere
  // Pool guests were never anyone's: they go with the server (taken ones keep running).
  if (impl_->domain)
    if (auto n = impl_->domain->stop_pool()) log().info("warm pool: deleted {} guests", n);
}

void server_instance::stop() {
  if (impl_->stopping.exchange(true)) return;
  net::post(impl_->io, [m = impl_.get()] {
    // First: a stop that waits on calls in flight must not go on building pool guests.
    if (m->domain) m->domain->halt_pool();
    m->server->stop();
    m->auto_pause->stop();
    if (m->prune_timer) m->prune_timer->cancel();
    if (m->signals) m->signals->cancel();
    m->io.stop();
  });
}

int serve(const serve_options& opts, std::ostream& out, std::ostream& err) {
  raise_fd_limit(); // a guest holds a pidfd and its calls' pipes and sockets
  auto server = server_instance::start(opts);
  if (!server) {
    const auto& f = server.error();
    err << "guestflow control-plane: " << f.message << '\n';
    return f.code == ec::bad_request || f.code == ec::policy_refused ? 2 : 1;
  }
  (*server)->stop_on_signals();
  out << "listening on " << (*server)->url() << std::endl;
  if (!(*server)->unix_url().empty())
    out << "listening on " << (*server)->unix_url() << std::endl;
  (*server)->run();
  return 0;
}

} // namespace guestflow::local
