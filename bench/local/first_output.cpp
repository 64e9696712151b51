#include "bench/local/first_output.hpp"

#include "actors/code_spec.hpp"
#include "actors/guest_names.hpp"
#include "actors/runtime.hpp"
#include "actors/sandbox_policy.hpp"
#include "actors/system_settings.hpp"
#include "bench/reaper_probe.hpp"
#include "bench/summary.hpp"
#include "controlplane/client/client.hpp"
#include "messages/type_ids.hpp"

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <random>
#include <stdexcept>
#include <thread>

namespace guestflow::bench {
namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

/// The runtime's own actor-system settings, as the CLI applies them.
struct runtime_config : caf::actor_system_config {
  runtime_config() { apply_runtime_settings(*this); }
};

/// When the first stdout chunk of the current run arrived (0: not yet), in ns of steady.
struct first_seen {
  std::atomic<int64_t> at_ns{0};
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

/// Stands where `guestflow code`'s output relay stands: notes the first stdout chunk.
exec_sink_actor::behavior_type first_output_sink(exec_sink_actor::pointer,
                                                 std::shared_ptr<first_seen> seen) {
  return {
      [seen](exec_stream_line& line) {
        int64_t none = 0;
        if (line.type == exec_stream_line::kind::stdout_chunk && !line.text.empty())
          seen->at_ns.compare_exchange_strong(none, now_ns());
      },
  };
}

} // namespace

first_output_samples measure_first_output(uint16_t port, size_t warmup, size_t runs,
                                          const std::function<void()>& before_each) {
  cp::endpoint ep;
  ep.base_url = "http://127.0.0.1:" + std::to_string(port);
  auto client = cp::client::make(ep);
  if (!client) throw std::runtime_error("client: " + client.error().message);
  policy::provider_info provider;
  provider.kind = cp::provider::local;
  auto caps = await<capabilities>([&](auto cb) { (*client)->capabilities_of(10s, cb); });
  if (!caps) throw std::runtime_error("capabilities: " + caps.error().message);
  provider.caps = *caps;
  auto catalog = await<shape_list>([&](auto cb) { (*client)->shapes(10s, cb); });
  if (!catalog) throw std::runtime_error("shapes: " + catalog.error().message);

  runtime_config cfg;
  caf::actor_system sys{cfg};
  runtime_options ro;
  ro.owner = names::owner_id("benchcp", "bench", "bench_control_plane");
  runtime rt{sys, *client, ro};
  std::mt19937_64 rng{11};
  code_request req;
  req.code = "print('hello from a guest')\n";
  const policy::sandbox_settings settings; // Langflow's defaults, as with no env set
  first_output_samples out;
  std::string failure;
  for (size_t i = 0; i < warmup + runs && failure.empty(); ++i) {
    auto spec =
        make_code_spec(req, settings, provider, *catalog,
                       names::ephemeral(names::guest_kind::backend, ro.owner, rng), rng);
    if (!spec) throw std::runtime_error("code spec refused: " + spec.error().message);
    spec->stream = true; // as session::run with a listener (`guestflow code` live output)
    auto seen = std::make_shared<first_seen>();
    auto opts = rt.options().execution;
    opts.listener = sys.spawn(first_output_sink, seen);
    auto exec = rt.spawn_execution(opts);
    caf::scoped_actor self{sys};
    if (before_each) before_each();
    const auto t0 = now_ns();
    self->request(exec, caf::duration{2min}, run_atom::value, std::move(*spec))
        .receive(
            [&](execution_report& r) {
              const auto done = now_ns();
              if (r.result.exit_code != 0 || r.outcome || r.result.error)
                failure = "run exited " + std::to_string(r.result.exit_code) +
                          (r.result.error ? ": " + *r.result.error : std::string{});
              else if (r.result.stdout_text.empty() && seen->at_ns.load() == 0)
                failure = "the run printed nothing";
              if (!failure.empty() || i < warmup) return;
              out.first_output_ms.push_back(static_cast<double>(seen->at_ns.load() - t0) / 1e6);
              out.run_ms.push_back(static_cast<double>(done - t0) / 1e6);
            },
            [&](caf::error& e) { failure = to_failure(e).message; });
    caf::anon_send_exit(opts.listener, caf::exit_reason::user_shutdown);
  }
  // The reaper owes nothing before the runtime stops: every guest was deleted.
  if (auto s = settled_reaper(sys, rt); s.tracked != 0 || s.pending != 0) {
    rt.stop();
    throw std::runtime_error("the runtime's reaper still tracks " + std::to_string(s.tracked) +
                             " guests after the first-output runs");
  }
  rt.stop();
  if (!failure.empty()) throw std::runtime_error("first-output run: " + failure);
  return out;
}

} // namespace guestflow::bench
