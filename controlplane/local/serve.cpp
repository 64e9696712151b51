#include "controlplane/local/serve.hpp"

#include "controlplane/local/auto_pause.hpp"
#include "controlplane/local/reconciler.hpp"
#include "controlplane/local/record_store.hpp"
#include "controlplane/local/simulated_control_plane.hpp"
#include "controlplane/local/state_lock.hpp"

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <charconv>
#include <ostream>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

namespace guestflow::local {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

result<tcp::endpoint> parse_listen(const std::string& listen) {
  auto colon = listen.rfind(':');
  if (colon == std::string::npos)
    return fail(ec::bad_request, "--listen: expected HOST:PORT, got '" + listen + "'");
  auto host = listen.substr(0, colon);
  auto port_text = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost") host = "127.0.0.1";
  unsigned port = 0;
  auto [p, e] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (e != std::errc{} || p != port_text.data() + port_text.size() || port > 65535)
    return fail(ec::bad_request, "--listen: bad port '" + port_text + "'");
  boost::system::error_code bad;
  auto addr = net::ip::make_address(host, bad);
  if (bad) return fail(ec::bad_request, "--listen: '" + host + "' is not an IP address");
  return tcp::endpoint{addr, static_cast<uint16_t>(port)};
}

std::chrono::milliseconds sweep_period(double scale) {
  auto ms = static_cast<long>(1000.0 * scale);
  return std::chrono::milliseconds{std::clamp(ms, 20L, 1000L)};
}

} // namespace

int serve(const serve_options& opts, std::ostream& out, std::ostream& err) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("control-plane"));
  auto say = [&err](const std::string& msg, int code) {
    err << "guestflow control-plane: " << msg << '\n';
    return code;
  };
  auto endpoint = parse_listen(opts.listen);
  if (!endpoint) return say(endpoint.error().message, 2);
  if (!endpoint->address().is_loopback() && opts.http.api_key.empty())
    return say("refusing to listen on non-loopback address " + endpoint->address().to_string() +
                   " without an API key; pass --api-key KEY or set "
                   "GUESTFLOW_CONTROL_PLANE_KEY, or listen on 127.0.0.1",
               2);
  if (!opts.simulate_latency_ms && opts.state_dir.empty())
    return say("--state-dir DIR is required", 2);
  ::signal(SIGPIPE, SIG_IGN);

  // Declaration order is teardown order in reverse: sessions (owned by io) go before the
  // domain they call, the domain before the backend and store it uses.
  std::optional<state_lock> lock;
  std::unique_ptr<guest_backend> backend;
  std::unique_ptr<record_store> store;
  std::unique_ptr<sandbox_service> service;
  net::thread_pool workers{std::max(1u, opts.workers)};
  net::io_context io{1};
  std::optional<tcp::acceptor> acceptor;
  try {
    if (!opts.simulate_latency_ms) {
      std::filesystem::create_directories(opts.state_dir);
      // Others may traverse (guests run as an unprivileged uid and their workspaces live
      // below) but not list; the records file itself is 0600.
      ::chmod(opts.state_dir.c_str(), 0711);
      auto l = state_lock::acquire(opts.state_dir);
      if (!l) return say(l.error().message, 2);
      lock.emplace(std::move(*l));
    }
    acceptor.emplace(listen_on(io, *endpoint));
  } catch (const std::exception& e) {
    return say("cannot listen on " + opts.listen + ": " + e.what(), 1);
  }
  auto port = acceptor->local_endpoint().port();

  if (opts.simulate_latency_ms) {
    service = std::make_unique<simulated_control_plane>(
        std::chrono::milliseconds{*opts.simulate_latency_ms});
    spdlog::warn("simulated control plane ({} ms per call): no guest is ever started",
                 *opts.simulate_latency_ms);
  } else {
    try {
      backend_config cfg;
      cfg.state_dir = opts.state_dir;
      cfg.protected_ports = {port};
      if (opts.nft_path)
        cfg.nft = *opts.nft_path;
      backend = std::make_unique<guest_backend>(cfg);
    } catch (const std::exception& e) {
      return say(std::string{"guest backend unavailable: "} + e.what(), 1);
    }
    auto s = record_store::open(opts.state_dir / "control-plane.db");
    if (!s) return say(s.error().message, 1);
    store = std::move(*s);
    auto report = reconcile(*store, *backend);
    if (!report) return say(report.error().message, 1);
    spdlog::info("reconciled {} records: {} adopted, {} reaped", report->records.size(),
                 report->adopted, report->reaped);
    for (const auto& p : report->problems)
      spdlog::warn("reconcile: {}", p);
    service = std::make_unique<control_plane>(*backend, *store, opts.domain,
                                              std::move(report->records));
  }

  http_server server{io, workers, *service, opts.http, std::move(*acceptor)};
  auto_pause_timer auto_pause{io, workers, *service,
                              sweep_period(opts.domain.auto_pause_scale)};
  net::signal_set signals{io, SIGINT, SIGTERM};
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::info("signal {}: stopping (guests keep running)", sig);
    server.stop();
    auto_pause.stop();
    io.stop();
  });
  server.start();
  auto_pause.start();
  auto host = endpoint->address().is_v6() ? "[" + endpoint->address().to_string() + "]"
                                          : endpoint->address().to_string();
  out << "listening on http://" << host << ':' << port << std::endl;
  io.run();
  workers.join(); // pending kills and reaps finish; their replies go nowhere
  return 0;
}

} // namespace guestflow::local
