// The warm pool on real guests: it fills, a matching create takes a guest no one has used
// and the pool refills, pool guests are unreachable until taken, and none is ever left
// behind — not at SIGTERM (in-flight creates included), not after a kill -9 (a restart
// adopts them back, `guestflow reap` deletes them).
#include "controlplane/local/guests/host_command.hpp"
#include "controlplane/local/network/netns_egress.hpp"
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/integration/control_plane/image_fixture.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <sched.h>
#include <set>
#include <signal.h>
#include <sys/utsname.h>
#include <thread>
#include <unistd.h>

namespace guestflow::testing {
namespace {

constexpr const char* pool_shape = "s-1vcpu-256mb";
const std::string deny_all_create = R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})";

/// One pool's counts from GET /v1/pool.
struct pool_counts {
  int target = -1, ready = -1, creating = -1, floor = -1, cap = -1;
  int takes = -1, misses = -1, evicted = -1, fills = -1;
};

/// Cgroup directories anywhere under /sys/fs/cgroup whose name contains `id`.
std::vector<std::string> cgroup_dirs_naming(const std::string& id) {
  std::vector<std::string> out;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it{
      "/sys/fs/cgroup", std::filesystem::directory_options::skip_permission_denied, ec};
  for (; !ec && it != std::filesystem::recursive_directory_iterator{}; it.increment(ec)) {
    if (!it->is_directory(ec)) continue;
    if (it->path().filename().string().find(id) != std::string::npos)
      out.push_back(it->path().string());
  }
  return out;
}

class warm_pool_test : public control_plane_test {
protected:
  /// Restarts the server with `--warm-pool spec`.
  void start_pool(const std::string& spec) { start({"--warm-pool", spec}); }

  /// The control plane dies without a word (its guests, pool or not, outlive it).
  void kill_9() {
    ::kill(cp_->pid(), SIGKILL);
    cp_.reset();
  }

  /// The counts of the pool of `shape` on debian:12 whose egress is `egress` (the wire list's
  /// JSON items, as GET /v1/pool spells them) and whose guests are of `isolation`.
  pool_counts counts(const std::string& shape = pool_shape,
                     const std::string& egress = R"("240.0.0.0/4")",
                     const std::string& isolation = "namespaces") {
    auto r = call("GET", "/v1/pool");
    EXPECT_EQ(r.status, 200u) << r.body;
    std::regex entry{R"re(\{"shape":"([^"]+)","image":"debian:12","egress":\[([^\]]*)\],)re"
                     R"re("target":(\d+),"ready":(\d+),"creating":(\d+),"floor":(\d+),)re"
                     R"re("cap":(\d+),"preload":"","takes":(\d+),"misses":(\d+),)re"
                     R"re("evicted":(\d+),"fills":(\d+),"fill_ms":\d+,)re"
                     R"re("isolation":"([a-z]+)"\})re"};
    pool_counts c;
    for (std::sregex_iterator i{r.body.begin(), r.body.end(), entry}, end; i != end; ++i)
      if ((*i)[1] == shape && (*i)[2] == egress && (*i)[12] == isolation) {
        auto n = [&](int k) { return std::stoi((*i)[k]); };
        c = {n(3), n(4), n(5), n(6), n(7), n(8), n(9), n(10), n(11)};
      }
    return c;
  }

  /// Waits until the pool holds `n` ready guests and builds none.
  bool ready(int n, const std::string& shape = pool_shape,
             const std::string& egress = R"("240.0.0.0/4")",
             const std::string& isolation = "namespaces") {
    return eventually(
        [&] {
          auto c = counts(shape, egress, isolation);
          return c.ready == n && c.creating == 0;
        },
        std::chrono::seconds{60});
  }

  /// What a guest runs, seen from inside (the shell lists every other process by its glob
  /// alone, so no child of its own can show up).
  std::string processes(const std::string& id) {
    return exec(id, "/bin/sh",
                {"-c", "for p in /proc/[0-9]*; do [ \"$p\" = /proc/$$ ] || cat $p/comm; done"})
        .stdout_text;
  }

  /// Ids of every guest the backend built (one workspace each): the pool's, while the test
  /// created none. A fork-server pool's template (a guest of its own) is none of them.
  std::set<std::string> guest_ids() const {
    std::set<std::string> out;
    auto dir = state_dir_ / "guests";
    if (!std::filesystem::exists(dir)) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      if (e.path().filename().string().rfind("fork-template-", 0) != 0)
        out.insert(e.path().filename().string());
    return out;
  }

  /// No process, cgroup directory or workspace of `id` is left.
  void expect_gone(const std::string& id) {
    EXPECT_TRUE(eventually([&] { return guest_pids(id).empty(); })) << id << " has processes";
    EXPECT_EQ(cgroup_dirs_naming(id), std::vector<std::string>{}) << id;
    EXPECT_FALSE(std::filesystem::exists(state_dir_ / "guests" / id)) << id;
  }
};

TEST_F(warm_pool_test, fills_then_a_matching_create_takes_a_fresh_guest_and_it_refills) {
  // The ordinary pool, whose guests hold what a guest built now holds plus the waiter
  // (a fork-server pool's clones: fork_pool_test.cpp).
  start({"--warm-pool", "s-1vcpu-256mb=2"}, {{"GUESTFLOW_FORK_POOL", "0"}});
  ASSERT_TRUE(ready(2)) << call("GET", "/v1/pool").body;
  EXPECT_EQ(counts().target, 2);
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  // A guest built on demand, for comparison: what a fresh guest runs.
  auto built = create(R"({"shape":"s-1vcpu-512mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(pool.count(built.id), 0u) << "a non-matching create builds its own guest";

  auto taken = create(
      R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"name":"warm","envs":{"GREETING":"hi"}})");
  EXPECT_EQ(pool.count(taken.id), 1u) << taken.id << " was not a pool member";
  EXPECT_EQ(taken.name, "warm");
  EXPECT_EQ(taken.shape, pool_shape);
  EXPECT_EQ(taken.rootfs, "debian:12");
  // Fresh: its init runs, plus the Python waiter that would serve a first python3 run
  // (a guest built just now has no waiter); the first other exec below kills the waiter,
  // and from then on the guest holds what a guest built just now holds: an empty
  // workspace and /tmp, the request's envs and name; the hostname stays its id.
  EXPECT_EQ(guest_pids(taken.id).size(), guest_pids(built.id).size() + 1);
  EXPECT_FALSE(guest_pids(taken.id).empty());
  auto v = view(taken.id);
  EXPECT_EQ(v.status, sandbox_status::running);
  EXPECT_EQ(v.name, "warm");
  EXPECT_EQ(v.envs, std::vector<std::string>{"GREETING"});
  auto r =
      exec(taken.id, "/bin/sh",
           {"-c", "ls -A /workspace /tmp; echo \"$GREETING\"; cat /proc/sys/kernel/hostname"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "/tmp:\n\n/workspace:\nhi\n" + taken.id + "\n");
  // Seen from inside: the same processes as in a guest built just now.
  auto fresh = processes(built.id);
  EXPECT_FALSE(fresh.empty());
  EXPECT_EQ(processes(taken.id), fresh);
  // It is the caller's now: listed, counted, deletable, never offered again.
  auto list = data<sandbox_list>(call("GET", "/v1/sandboxes"));
  EXPECT_EQ(list.total, 2u);

  // The pool refills to 2 with guests it had not before.
  ASSERT_TRUE(ready(2));
  auto now = guest_ids();
  EXPECT_EQ(now.size(), 4u) << "2 pool guests, the taken one, the built one";
  for (const auto& id : pool)
    EXPECT_TRUE(now.count(id));

  // A second take gets the other original pool guest, not the taken one again.
  auto second = create(deny_all_create);
  EXPECT_NE(second.id, taken.id);
  EXPECT_EQ(pool.count(second.id), 1u);
}

TEST_F(warm_pool_test, a_gvisor_pool_serves_gvisor_creates_only_and_fresh) {
  start_pool("s-1vcpu-256mb+gvisor=1,s-1vcpu-512mb=1");
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  if (std::find(caps.isolations.begin(), caps.isolations.end(), "gvisor") ==
      caps.isolations.end())
    GTEST_SKIP() << "no gVisor on this host";
  ASSERT_TRUE(ready(1, pool_shape, R"("240.0.0.0/4")", "gvisor"))
      << call("GET", "/v1/pool").body;
  ASSERT_TRUE(ready(1, "s-1vcpu-512mb")) << call("GET", "/v1/pool").body;
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  std::string gvisor_guest, namespaces_guest;
  for (const auto& id : pool)
    (std::filesystem::exists(state_dir_ / "gvisor" / id) ? gvisor_guest : namespaces_guest) =
        id;
  ASSERT_FALSE(gvisor_guest.empty()) << "the gVisor pool guest has its runsc state";
  ASSERT_FALSE(namespaces_guest.empty());

  // Differing only in isolation, neither pool serves the other's creates: each builds its own.
  auto ns = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(pool.count(ns.id), 0u) << "a namespaces create got pool guest " << ns.id;
  EXPECT_EQ(view(ns.id).isolation, "namespaces");
  auto cold =
      create(R"({"shape":"s-1vcpu-512mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(pool.count(cold.id), 0u) << "a gVisor create got pool guest " << cold.id;
  EXPECT_EQ(view(cold.id).isolation, "gvisor");
  EXPECT_EQ(counts(pool_shape, R"("240.0.0.0/4")", "gvisor").ready, 1);
  EXPECT_EQ(counts("s-1vcpu-512mb").ready, 1);
  EXPECT_EQ(counts(pool_shape, R"("240.0.0.0/4")", "gvisor").takes, 0);
  EXPECT_EQ(counts("s-1vcpu-512mb").takes, 0);

  // A gVisor create of the pool's key takes its guest, in a fraction of a cold build.
  auto taken = create(
      R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"],"name":"g1"})");
  EXPECT_EQ(taken.id, gvisor_guest);
  EXPECT_LT(taken.spawn_ms * 4, cold.spawn_ms)
      << "taken in " << taken.spawn_ms << " ms, a cold gVisor build took " << cold.spawn_ms;
  auto v = view(taken.id);
  EXPECT_EQ(v.isolation, "gvisor");
  EXPECT_EQ(v.started_from, "boot");
  EXPECT_EQ(v.name, "g1");
  auto version = exec(taken.id, "/bin/cat", {"/proc/version"});
  utsname host{};
  ::uname(&host);
  EXPECT_EQ(version.stdout_text.find(std::string{"Linux version "} + host.release),
            std::string::npos)
      << "gVisor's Sentry answers, not the host kernel: " << version.stdout_text;
  // Fresh, and what it is given now is gone with it: the next pool guest has none of it.
  const std::string list =
      "for f in /workspace/* /workspace/.[!.]* /tmp/* /tmp/.[!.]*; do [ -e \"$f\" ] && echo "
      "\"$f\"; done; echo end";
  auto r = exec(taken.id, "/bin/sh",
                {"-c", list +
                           "; echo left > /workspace/f; echo left > /tmp/f; "
                           "sleep 600 >/dev/null 2>&1 & " +
                           list});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, "end\n/workspace/f\n/tmp/f\nend\n") << r.stderr_text;
  const auto fresh_ps = processes(cold.id);
  EXPECT_NE(processes(taken.id), fresh_ps) << "its sleep runs";
  EXPECT_EQ(call("DELETE", "/v1/sandboxes/" + taken.id).status, 200u);
  ASSERT_TRUE(ready(1, pool_shape, R"("240.0.0.0/4")", "gvisor"));
  auto next =
      create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  EXPECT_NE(next.id, taken.id);
  EXPECT_EQ(pool.count(next.id), 0u);
  EXPECT_EQ(view(next.id).isolation, "gvisor");
  EXPECT_EQ(exec(next.id, "/bin/sh", {"-c", list}).stdout_text, "end\n");
  EXPECT_EQ(processes(next.id), fresh_ps) << "what a gVisor guest built just now runs";
  EXPECT_EQ(counts(pool_shape, R"("240.0.0.0/4")", "gvisor").takes, 2);
  EXPECT_EQ(counts("s-1vcpu-512mb").takes, 0) << "never taken by a gVisor create";
  // /metrics tells the two kinds' series apart (namespaces: labels as before).
  auto m = call("GET", "/metrics").body;
  EXPECT_NE(
      m.find(R"(shape="s-1vcpu-256mb",image="debian:12",isolation="gvisor",state="ready"})"),
      std::string::npos)
      << m;
  EXPECT_NE(m.find(R"(shape="s-1vcpu-512mb",image="debian:12",state="ready"})"),
            std::string::npos)
      << m;
}

TEST_F(warm_pool_test, pool_guests_are_unreachable_until_taken) {
  start_pool("s-1vcpu-256mb=2");
  ASSERT_TRUE(ready(2));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  for (const auto& id : pool) {
    auto base = "/v1/sandboxes/" + id;
    expect_refusal(call("GET", base), 404, id);
    expect_refusal(exec_reply(id, "/bin/true"), 404, id);
    expect_refusal(get_file(id, "/etc/hostname"), 404, id);
    expect_refusal(put_file(id, "/workspace/planted", "x"), 404, id);
    expect_refusal(call("GET", base + "/egress"), 404, id);
    expect_refusal(call("POST", base + "/pause"), 404, id);
    expect_refusal(call("DELETE", base), 404, id);
  }
  EXPECT_EQ(sandbox_total(), 0u) << "pool guests are no one's: never listed";
  EXPECT_EQ(data<whoami>(call("GET", "/v1/whoami")).total, 0u);
  // Nothing reached them: still ready, and each one's workspace (a file system mounted only
  // in the guest) is still empty when a create takes it.
  EXPECT_EQ(counts().ready, 2);
  for (int i = 0; i < 2; ++i) {
    auto taken = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
    EXPECT_EQ(pool.count(taken.id), 1u) << taken.id << " was not a pool member";
    auto ls = exec(taken.id, "/bin/ls", {"-A", "/workspace"});
    EXPECT_EQ(ls.exit_code, 0) << ls.stderr_text;
    EXPECT_EQ(ls.stdout_text, "") << taken.id;
  }
}

TEST_F(warm_pool_test, creates_the_pool_cannot_serve_build_their_own_guest) {
  start_pool("s-1vcpu-256mb=1");
  ASSERT_TRUE(ready(1));
  auto pool = guest_ids();
  auto other_shape = create(R"({"shape":"s-1vcpu-64mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(pool.count(other_shape.id), 0u);
  // A name already taken is refused before the pool is touched.
  auto named = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"name":"n"})");
  EXPECT_EQ(pool.count(named.id), 1u);
  ASSERT_TRUE(ready(1));
  auto before = guest_ids();
  expect_refusal(call("POST", "/v1/sandboxes",
                      R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"],"name":"n"})"),
                 409, "name 'n' is taken");
  EXPECT_EQ(counts().ready, 1) << "a refused create takes nothing";
  EXPECT_EQ(guest_ids(), before);
}

TEST_F(warm_pool_test, a_pool_guest_that_died_is_never_handed_out) {
  start_pool("s-1vcpu-256mb=1");
  ASSERT_TRUE(ready(1));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 1u);
  auto dead = *pool.begin();
  for (int pid : guest_pids(dead))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(eventually([&] { return guest_pids(dead).empty(); }));
  auto c = create(deny_all_create);
  EXPECT_NE(c.id, dead) << "a guest whose init is gone must not be taken";
  EXPECT_EQ(exec(c.id, "/bin/echo", {"alive"}).stdout_text, "alive\n");
  // The dead one is deleted, and the pool refills with a live guest.
  ASSERT_TRUE(eventually([&] { return !guest_ids().count(dead); }, std::chrono::seconds{30}));
  expect_gone(dead);
  EXPECT_TRUE(ready(1));
}

TEST_F(warm_pool_test, sigterm_deletes_every_pool_guest) {
  start_pool("s-1vcpu-256mb=2");
  ASSERT_TRUE(ready(2));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  EXPECT_EQ(stop(), 0) << cp_->stderr_text();
  for (const auto& id : pool)
    expect_gone(id);
  EXPECT_EQ(guest_ids(), std::set<std::string>{});
  start(); // for TearDown
}

TEST_F(warm_pool_test, sigterm_while_filling_waits_for_the_create_and_deletes_it) {
  start_pool("s-1vcpu-256mb=4");
  // Stopped at once: the filler is mid-create (or about to be).
  EXPECT_EQ(stop(), 0) << cp_->stderr_text();
  EXPECT_EQ(guest_ids(), std::set<std::string>{}) << "no workspace may be left";
  start();
  EXPECT_EQ(sandbox_total(), 0u);
  EXPECT_EQ(guest_ids(), std::set<std::string>{}) << "and nothing for a restart to adopt";
}

// A stop that waits on a call in flight (here a list held 6 s on a worker by --faults; in
// the probe, calls slowed by a full disk) builds no pool guest meanwhile: the filler is
// halted first, so at most the create in flight at the SIGTERM finishes, and it is deleted.
TEST_F(warm_pool_test, a_stop_waiting_on_calls_in_flight_builds_no_pool_guest) {
  start({"--warm-pool", "s-1vcpu-256mb=8", "--faults", "list:delay=6s"});
  ASSERT_TRUE(eventually([&] { return counts().ready >= 1; }, std::chrono::seconds{60}));
  std::thread held{[this] {
    try {
      call("GET", "/v1/sandboxes"); // cut by the stop, or answered: either is fine
    } catch (const std::exception&) {
    }
  }};
  ASSERT_TRUE(eventually(
      [&] {
        return cp_->stderr_text().find("fault injected: list delay") != std::string::npos;
      },
      std::chrono::seconds{30}));
  auto before = guest_ids();
  std::set<std::string> seen = before;
  std::atomic<bool> stopped{false};
  std::thread watch{[&] { // every workspace that appears while the stop runs
    while (!stopped) {
      auto now = guest_ids();
      seen.insert(now.begin(), now.end());
      std::this_thread::sleep_for(std::chrono::milliseconds{10}); // a sampling period
    }
  }};
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(stop(), 0) << cp_->stderr_text();
  auto took = std::chrono::steady_clock::now() - t0;
  stopped = true;
  watch.join();
  held.join();
  std::vector<std::string> built_after;
  std::set_difference(seen.begin(), seen.end(), before.begin(), before.end(),
                      std::back_inserter(built_after));
  // At most the creates in flight at the SIGTERM: one per builder.
  EXPECT_LE(built_after.size(), std::clamp(std::thread::hardware_concurrency(), 1u, 4u))
      << "pool guests built after the SIGTERM";
  EXPECT_GE(took, std::chrono::seconds{4}) << "the stop did not wait for the held call";
  EXPECT_EQ(guest_ids(), std::set<std::string>{}) << "no guest may be left";
  for (const auto& id : seen)
    expect_gone(id);
  start(); // for TearDown
}

TEST_F(warm_pool_test, kill_9_then_restart_adopts_the_pool_without_duplicates) {
  start_pool("s-1vcpu-256mb=2");
  ASSERT_TRUE(ready(2));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  kill_9();
  for (const auto& id : pool)
    EXPECT_FALSE(guest_pids(id).empty()) << "pool guests outlive a killed control plane";

  start_pool("s-1vcpu-256mb=2");
  ASSERT_TRUE(ready(2));
  EXPECT_EQ(guest_ids(), pool) << "the same guests, adopted; none built, none duplicated";
  EXPECT_EQ(sandbox_total(), 0u);
  auto taken = create(deny_all_create);
  EXPECT_EQ(pool.count(taken.id), 1u);
  EXPECT_EQ(exec(taken.id, "/bin/echo", {"adopted"}).stdout_text, "adopted\n");

  // Restarted with a smaller pool: the surplus is deleted, nothing else touched.
  ASSERT_TRUE(ready(2));
  auto before = guest_ids();
  kill_9();
  start_pool("s-1vcpu-256mb=1");
  ASSERT_TRUE(eventually([&] { return guest_ids().size() == 2u; }, std::chrono::seconds{30}));
  EXPECT_TRUE(ready(1));
  for (const auto& id : guest_ids())
    EXPECT_TRUE(before.count(id)) << id << " was built after the restart";
  for (const auto& id : before)
    if (!guest_ids().count(id)) expect_gone(id);
  EXPECT_EQ(view(taken.id).status, sandbox_status::running) << "the taken guest is kept";
}

TEST_F(warm_pool_test, reap_deletes_the_pool_of_a_killed_control_plane) {
  start_pool("s-1vcpu-256mb=2");
  ASSERT_TRUE(ready(2));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 2u);
  kill_9();
  auto o = control_plane_process::run_to_exit(
      {"reap"}, {{"GUESTFLOW_STATE_DIR", state_dir_.string()}, {"GUESTFLOW_WARM_POOL", "off"}},
      std::chrono::seconds{60});
  EXPECT_EQ(o.status, 0) << o.stderr_text;
  for (const auto& id : pool)
    expect_gone(id);
  EXPECT_EQ(guest_ids(), std::set<std::string>{});
  start();
}

TEST_F(warm_pool_test, a_bad_spec_or_unknown_image_is_refused_at_start) {
  auto refused = [&](const std::string& spec, const std::string& needle) {
    auto o = control_plane_process::run_to_exit(
        {"control-plane", "--listen", "127.0.0.1:0", "--state-dir",
         (dir_.path() / "other").string(), "--warm-pool", spec});
    EXPECT_EQ(o.status, 2) << spec << ": " << o.stderr_text;
    EXPECT_NE(o.stderr_text.find(needle), std::string::npos) << o.stderr_text;
    EXPECT_EQ(o.stdout_text, "") << "a refused configuration never listens";
  };
  refused("s-9vcpu=1", "unknown shape 's-9vcpu'");
  refused("s-1vcpu-256mb", "no '=N'");
  refused("s-1vcpu-256mb@no-such-image=1", "unknown image 'no-such-image'");
}

// Capacity on loan: a node whose budget the pool fills still takes every create that fits
// without the pool — pool guests are deleted for it, least recently useful pool first —
// and refuses only what would not fit even then.
TEST_F(warm_pool_test, a_create_that_needs_room_gets_it_from_the_pool) {
  start({"--warm-pool", "s-1vcpu-256mb=3,s-1vcpu-64mb=1", "--memory-budget-mb", "832"});
  ASSERT_TRUE(ready(3));
  ASSERT_TRUE(ready(1, "s-1vcpu-64mb"));
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 4u);
  // Taken once: the 256 MiB pool is the more recently useful one.
  auto taken = create(deny_all_create);
  EXPECT_EQ(pool.count(taken.id), 1u);
  // 256 + 2 x 256 + 64 = 832 MiB: full. A 512 MiB create that no pool serves is admitted by
  // deleting pool guests: the unused 64 MiB pool's first, then 256 MiB ones.
  auto big = create(R"({"shape":"s-1vcpu-512mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(pool.count(big.id), 0u);
  EXPECT_EQ(exec(big.id, "/bin/echo", {"room"}).stdout_text, "room\n");
  EXPECT_EQ(counts("s-1vcpu-64mb").evicted, 1) << call("GET", "/v1/pool").body;
  EXPECT_EQ(counts().evicted, 2) << call("GET", "/v1/pool").body;
  std::smatch committed;
  auto cap = call("GET", "/v1/capacity").body;
  ASSERT_TRUE(std::regex_search(cap, committed, std::regex{R"("memory_committed_mib":(\d+))"}));
  EXPECT_LE(std::stoi(committed[1]), 832) << cap;
  // The lent guests are gone, and nothing refills into room the create holds.
  for (const auto& id : pool)
    if (id != taken.id) expect_gone(id);
  EXPECT_EQ(counts().ready + counts().creating, 0);
  // Nothing left to lend: a create that does not fit is refused, and builds nothing.
  expect_refusal(call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb"})"), 429, "is full");
  // Room again: the pools refill (no guest leaked on the way: each workspace is a guest).
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + big.id).status, 200u);
  ASSERT_TRUE(ready(2));
  ASSERT_TRUE(ready(1, "s-1vcpu-64mb"));
  EXPECT_EQ(guest_ids().size(), 4u) << "2 + 1 pool guests and the taken one";
}

// A pool sized from demand: a floor of 1, a cap of 3; a burst of creates raises its target
// (and it builds towards it), every take and miss is counted, and /metrics says so.
TEST_F(warm_pool_test, a_burst_of_takes_grows_the_pool_towards_its_cap) {
  start_pool("s-1vcpu-256mb=1..3");
  ASSERT_TRUE(ready(1));
  auto c = counts();
  EXPECT_EQ(c.floor, 1);
  EXPECT_EQ(c.cap, 3);
  EXPECT_EQ(c.target, 1) << "no demand yet: the floor";
  EXPECT_GE(c.fills, 1);
  for (int i = 0; i < 3; ++i)
    create(deny_all_create);
  c = counts();
  EXPECT_EQ(c.takes + c.misses, 3);
  EXPECT_GE(c.takes, 1);
  EXPECT_GT(c.target, 1) << "demand raised the target";
  ASSERT_TRUE(eventually([&] { return counts().ready >= 2; }, std::chrono::seconds{60}))
      << call("GET", "/v1/pool").body;
  EXPECT_LE(counts().ready + counts().creating, 3) << "never past the cap";
  auto m = call("GET", "/metrics").body;
  auto has = [&](const std::string& what) { return m.find(what) != std::string::npos; };
  EXPECT_TRUE(has("# TYPE guestflow_pool_takes_total counter")) << m;
  std::smatch takes;
  ASSERT_TRUE(std::regex_search(
      m, takes,
      std::regex{R"(guestflow_pool_takes_total\{node="[^"]+",shape="s-1vcpu-256mb",)"
                 R"(image="debian:12"\} (\d+))"}))
      << m;
  EXPECT_EQ(std::stoi(takes[1]), c.takes);
  EXPECT_TRUE(has("guestflow_pool_misses_total{")) << m;
  EXPECT_TRUE(has("guestflow_pool_fill_seconds_count{")) << m;
  EXPECT_TRUE(has("guestflow_pool_fill_seconds_sum{")) << m;
}

/// The warm pool in a network namespace of the test's own (the control plane it starts,
/// and so its guests' host-side veths and the shared host table, live there; the real
/// host's network is never touched), for pools whose guests have egress.
class warm_pool_egress_test : public warm_pool_test {
protected:
  void SetUp() override {
    if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0 ||
        ::access("/usr/sbin/nft", X_OK) != 0)
      GTEST_SKIP() << "needs root, ip and nft";
    ASSERT_EQ(::unshare(CLONE_NEWNET), 0) << std::strerror(errno);
    local::command_options opt;
    opt.input = "link set lo up\n";
    auto up = local::run_command({"/usr/sbin/ip", "-b", "-"}, opt);
    ASSERT_TRUE(up && up->exit_code == 0);
    warm_pool_test::SetUp();
  }

  /// The guest's nftables table, read inside its network namespace.
  static std::string guest_rules(const std::string& id) {
    int ns = ::open(local::netns_path(local::netns_name(id)).c_str(), O_RDONLY | O_CLOEXEC);
    EXPECT_GE(ns, 0) << id;
    local::command_options opt;
    opt.netns_fd = ns;
    auto out = local::run_command({"/usr/sbin/nft", "list", "table", "inet", "guestflow"}, opt);
    ::close(ns);
    return out ? out->output : out.error().message;
  }
};

// An executor's guest with egress rules comes from its pool built as a create builds it
// (its own netns, the rules asked for and no others) and fresh: nothing of the run before
// it. Creates that differ in egress alone never get it.
TEST_F(warm_pool_egress_test, a_pool_guest_with_egress_is_fresh_and_has_the_rules_asked_for) {
  const std::string rules = R"("10.0.0.0/8:443","198.51.100.9")";
  const std::string asked = R"({"shape":"s-1vcpu-512mb","egress":[)" + rules + "]}";
  start_pool("s-1vcpu-512mb#10.0.0.0/8:443|198.51.100.9=1");
  ASSERT_TRUE(ready(1, "s-1vcpu-512mb", rules)) << call("GET", "/v1/pool").body;
  auto pool = guest_ids();
  ASSERT_EQ(pool.size(), 1u);
  // Another egress, same shape and image: each builds its own guest.
  for (auto other : {R"(["240.0.0.0/4"])", R"(["*"])", R"(["10.0.0.0/8:443"])",
                     R"(["10.0.0.0/8:443","198.51.100.9","192.0.2.1"])"}) {
    auto g = create(R"({"shape":"s-1vcpu-512mb","egress":)" + std::string{other} + "}");
    EXPECT_EQ(pool.count(g.id), 0u) << other;
  }
  EXPECT_EQ(counts("s-1vcpu-512mb", rules).ready, 1) << "untouched by the others";
  // The same egress on another shape: built on demand, for comparison.
  auto built = create(R"({"shape":"s-1vcpu-256mb","egress":[)" + rules + "]}");
  auto expected_rules = guest_rules(built.id);
  EXPECT_NE(expected_rules.find("10.0.0.0/8"), std::string::npos) << expected_rules;
  EXPECT_NE(expected_rules.find("198.51.100.9"), std::string::npos) << expected_rules;

  auto first = create(asked);
  EXPECT_EQ(pool.count(first.id), 1u) << first.id << " was not the pool guest";
  EXPECT_EQ(first.egress, built.egress) << "the policy asked for";
  EXPECT_EQ(guest_rules(first.id), expected_rules) << "its netns holds the rules asked for";
  // A run leaves things behind: files, a process, a changed environment.
  auto r = exec(first.id, "/bin/sh",
                {"-c", "echo s > /workspace/secret; echo s > /tmp/secret; "
                       "(sleep 600 &) ; echo done"});
  EXPECT_EQ(r.stdout_text, "done\n") << r.stderr_text;
  ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + first.id).status, 200u);
  expect_gone(first.id);

  // The next run's guest, from the refilled pool: none of it.
  ASSERT_TRUE(ready(1, "s-1vcpu-512mb", rules));
  auto refill = guest_ids();
  auto second = create(asked);
  EXPECT_NE(second.id, first.id);
  EXPECT_EQ(refill.count(second.id), 1u) << "taken from the pool";
  EXPECT_EQ(pool.count(second.id), 0u) << "a guest built after the first was taken";
  auto ls = exec(second.id, "/bin/sh", {"-c", "ls -A /workspace /tmp"});
  EXPECT_EQ(ls.stdout_text, "/tmp:\n\n/workspace:\n") << ls.stderr_text;
  EXPECT_EQ(processes(second.id), processes(built.id)) << "no process of the run before";
  EXPECT_EQ(guest_rules(second.id), expected_rules);
}

using warm_pool_image_test = image_test;

// The image is part of the key: a pool of an imported image serves creates of that image
// alone, with that image's root.
TEST_F(warm_pool_image_test, a_pool_serves_only_creates_of_its_image) {
  auto tree = dir_.path() / "tree";
  make_tiny_rootfs(tree, "pooled image");
  added("tiny", "rootfs", tree);
  start({"--warm-pool", "s-1vcpu-256mb@tiny=1"});
  ASSERT_TRUE(eventually(
      [&] {
        return call("GET", "/v1/pool")
                   .body.find(R"("image":"tiny","egress":["240.0.0.0/4"],"target":1,)"
                              R"("ready":1,"creating":0)") != std::string::npos;
      },
      std::chrono::seconds{60}))
      << call("GET", "/v1/pool").body;
  std::set<std::string> pool;
  for (const auto& e : std::filesystem::directory_iterator(state_dir_ / "guests"))
    pool.insert(e.path().filename().string());
  ASSERT_EQ(pool.size(), 1u);
  auto other = create_on("debian:12");
  EXPECT_EQ(pool.count(other.id), 0u) << "another image builds its own guest";
  auto taken = create_on("tiny");
  EXPECT_EQ(pool.count(taken.id), 1u) << "the pool's guest";
  EXPECT_EQ(taken.rootfs, "tiny");
  EXPECT_EQ(exec(taken.id, "cat", {"/marker.txt"}).stdout_text, "pooled image");
}

} // namespace
} // namespace guestflow::testing
