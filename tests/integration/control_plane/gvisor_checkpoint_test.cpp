// gVisor guests whose stop keeps memory, on the wire with real runsc sandboxes: a background
// Python counter goes on across stop/start and wake on use (same process, same interpreter
// state, value continued); a checkpoint that cannot be restored boots cold from the kept
// workspace and says so in the view; delete removes the checkpoint with the workspace; an
// image's snapshot is restored by its creates (its preloaded python3 serves the first run).
#include "controlplane/local/guests/gvisor_checkpoint.hpp"
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/integration/control_plane/image_fixture.hpp"

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace guestflow::testing {
namespace {

using control_plane_gvisor_checkpoint = control_plane_test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

/// Without a network: runsc cannot checkpoint a sandbox on the host's network stack, which
/// a networked gVisor guest uses inside its netns (its stop then keeps the disk only).
const std::string gvisor_persistent =
    R"({"shape":"s-1vcpu-256mb","persistent":true,"idle_ttl_seconds":0,"isolation":"gvisor",)"
    R"("egress":["240.0.0.0/4"]})";

/// A Python program that counts in memory and publishes "pid count token" every 20 ms: the
/// token is drawn once at its start, so only the same interpreter goes on with it.
const std::string counter_program = R"(import os, time
token = os.urandom(8).hex()
i = 0
while True:
    with open('/workspace/counter.tmp', 'w') as f:
        f.write('%d %d %s\n' % (os.getpid(), i, token))
    os.replace('/workspace/counter.tmp', '/workspace/counter')
    i += 1
    time.sleep(0.02)
)";

struct counter_state {
  long pid = -1;
  long count = -1;
  std::string token;
};

class checkpoint_fixture : public control_plane_gvisor_checkpoint {
protected:
  void SetUp() override {
    control_plane_gvisor_checkpoint::SetUp();
    auto caps = call("GET", "/v1/capabilities");
    if (caps.body.find("\"gvisor\"") == std::string::npos)
      GTEST_SKIP() << "this control plane offers no gVisor guests: " << caps.body;
  }

  /// The counter, started in the background (its output nowhere: the exec returns at once).
  void start_counter(const std::string& id) {
    auto r = exec(id, "/bin/sh",
                  {"-c", "python3 -c \"$0\" </dev/null >/dev/null 2>&1 &", counter_program});
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  }

  /// The counter's last line as the guest's workspace holds it (read through the files API).
  counter_state read_counter(const std::string& id) {
    counter_state c;
    auto f = get_file(id, "/workspace/counter");
    if (f.status != 200u) return c;
    std::istringstream in{f.body};
    in >> c.pid >> c.count >> c.token;
    return c;
  }

  /// Polls until the counter passed `at_least`.
  counter_state counter_past(const std::string& id, long at_least) {
    counter_state c;
    eventually([&] { return (c = read_counter(id)).count > at_least; }, 30s, 20ms);
    return c;
  }

  fs::path checkpoint_of(const std::string& id) const {
    return state_dir_ / "guests" / id / "checkpoint";
  }
};

TEST_F(checkpoint_fixture, a_background_counter_goes_on_across_stop_and_start) {
  auto g = create(gvisor_persistent);
  ASSERT_EQ(view(g.id).isolation, "gvisor");
  ASSERT_EQ(exec(g.id, "/bin/sh", {"-c", "echo kept > /workspace/f"}).exit_code, 0);
  start_counter(g.id);
  auto before = counter_past(g.id, 5);
  ASSERT_GT(before.count, 5) << "the counter never ran";

  auto s = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/stop"));
  EXPECT_EQ(s.status, sandbox_status::stopped);
  EXPECT_TRUE(guest_pids(g.id).empty()) << "a stopped guest has no process left";
  EXPECT_TRUE(fs::exists(checkpoint_of(g.id) / "checkpoint.img"));

  auto started = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start"));
  EXPECT_EQ(started.status, sandbox_status::running);
  EXPECT_EQ(started.started_from, "checkpoint");
  EXPECT_FALSE(started.restore_error) << *started.restore_error;
  // The first value after the start is where the memory stood: nothing counted meanwhile.
  auto first = read_counter(g.id);
  const long at_stop = first.count;
  EXPECT_EQ(first.pid, before.pid);
  EXPECT_EQ(first.token, before.token) << "the same interpreter, its variables kept";
  EXPECT_GE(first.count, before.count) << "the value continued, not restarted";
  auto after = counter_past(g.id, at_stop);
  EXPECT_GT(after.count, at_stop) << "the restored process runs on";
  EXPECT_EQ(after.token, before.token);
  EXPECT_EQ(after.pid, before.pid);
  EXPECT_FALSE(fs::exists(checkpoint_of(g.id))) << "a restored checkpoint is spent";
  EXPECT_EQ(exec(g.id, "/bin/cat", {"/workspace/f"}).stdout_text, "kept\n");
  // The record keeps it: a control plane that restarts (and adopts the guest) still says so.
  stop();
  start();
  EXPECT_EQ(view(g.id).started_from, "checkpoint");
  EXPECT_FALSE(view(g.id).restore_error);
  EXPECT_EQ(read_counter(g.id).token, before.token) << "adopted, not rebuilt";

  // Wake on use restores too.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  auto woken = read_counter(g.id); // the files API wakes it
  EXPECT_EQ(woken.token, before.token);
  EXPECT_EQ(view(g.id).started_from, "checkpoint");
  EXPECT_GT(counter_past(g.id, woken.count).count, woken.count);

  // Delete while stopped takes the checkpoint with the workspace.
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  ASSERT_TRUE(fs::exists(checkpoint_of(g.id)));
  EXPECT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_FALSE(fs::exists(state_dir_ / "guests" / g.id));
}

TEST_F(checkpoint_fixture, a_corrupt_checkpoint_boots_cold_with_the_files_intact) {
  auto g = create(gvisor_persistent);
  ASSERT_EQ(exec(g.id, "/bin/sh", {"-c", "echo kept > /workspace/f"}).exit_code, 0);
  start_counter(g.id);
  auto before = counter_past(g.id, 3);
  ASSERT_GT(before.count, 3);
  ASSERT_EQ(call("POST", "/v1/sandboxes/" + g.id + "/stop").status, 200u);
  const auto image = checkpoint_of(g.id) / "checkpoint.img";
  ASSERT_TRUE(fs::exists(image));
  {
    // Same size, wrong bytes: what a torn copy or a bad disk leaves.
    auto size = fs::file_size(image);
    std::ofstream out{image, std::ios::binary | std::ios::trunc};
    out << std::string(size, 'x');
  }

  auto started = data<sandbox_view>(call("POST", "/v1/sandboxes/" + g.id + "/start"));
  EXPECT_EQ(started.status, sandbox_status::running);
  EXPECT_EQ(started.started_from, "boot");
  ASSERT_TRUE(started.restore_error);
  EXPECT_NE(started.restore_error->find("restore"), std::string::npos)
      << *started.restore_error;
  EXPECT_EQ(view(g.id).started_from, "boot") << "the view keeps saying so";
  EXPECT_EQ(exec(g.id, "/bin/cat", {"/workspace/f"}).stdout_text, "kept\n") << "files intact";
  // A cold boot: the counter's process is gone, its last value is what the disk kept.
  auto last = read_counter(g.id);
  EXPECT_EQ(last.token, before.token);
  EXPECT_FALSE(eventually([&] { return read_counter(g.id).count > last.count; }, 300ms, 20ms))
      << "no process from before the stop runs after a cold boot";
  EXPECT_FALSE(fs::exists(checkpoint_of(g.id))) << "the bad checkpoint is not tried again";
  EXPECT_TRUE(guest_pids(g.id).size() > 0);
  // Across a control-plane restart: the record kept how it started and why.
  stop();
  start();
  auto after = view(g.id);
  EXPECT_EQ(after.status, sandbox_status::running);
  EXPECT_EQ(after.started_from, "boot");
  ASSERT_TRUE(after.restore_error);
  EXPECT_EQ(*after.restore_error, *started.restore_error);
}

TEST_F(checkpoint_fixture, a_snapshot_handoff_nobody_takes_gives_up_within_its_bound) {
  // The relay and the dismissal of a snapshot's waiting python3, with a FIFO whose reader is
  // gone (a waiter OOM-killed after the restore): each gives up on its own, the relay with
  // 125, and removes the FIFO. Run as ordinary execs: the scripts are the ones the control
  // plane runs.
  auto g = create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  const std::string fifo = "/tmp/.guestflow-snapshot";
  const auto bound = std::chrono::seconds(local::snapshot_handoff_seconds);
  auto timed = [&](const exec_request& r) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = exec(g.id, r.cmd, r.args);
    return std::pair{out, std::chrono::steady_clock::now() - t0};
  };
  auto gone = [&] {
    return exec(g.id, "/bin/sh", {"-c", "[ -e " + fifo + " ] && echo there || echo gone"})
        .stdout_text;
  };
  ASSERT_EQ(exec(g.id, "/usr/bin/mkfifo", {"-m", "600", fifo}).exit_code, 0);
  auto [relayed, relay_took] =
      timed(local::snapshot_relay(std::string{"python3\0-c\0print(1)", 20}));
  EXPECT_EQ(relayed.exit_code, 125) << relayed.stderr_text;
  EXPECT_EQ(relayed.stdout_text, "");
  EXPECT_GE(relay_took, bound);
  EXPECT_LT(relay_took, bound + 20s) << "the handoff has a bound of its own";
  EXPECT_EQ(gone(), "gone\n");

  ASSERT_EQ(exec(g.id, "/usr/bin/mkfifo", {"-m", "600", fifo}).exit_code, 0);
  auto [dismissed, dismiss_took] = timed(local::snapshot_dismiss());
  EXPECT_EQ(dismissed.exit_code, 0) << dismissed.stderr_text;
  EXPECT_GE(dismiss_took, bound);
  EXPECT_LT(dismiss_took, bound + 20s);
  EXPECT_EQ(gone(), "gone\n");

  // With a reader the handoff is at once: the request arrives whole.
  auto taken = exec(g.id, "/bin/sh",
                    {"-c",
                     "mkfifo -m 600 " + fifo + "; (cat " + fifo +
                         " | tr '\\0' ' ' > /tmp/got) & sleep 0.2; \"$@\"; wait; "
                         "cat /tmp/got",
                     "sh", "/bin/sh", "-c", local::snapshot_dismiss().args[1]});
  EXPECT_EQ(taken.stdout_text, "-\n") << taken.stderr_text;
}

class snapshot_fixture : public image_test {
protected:
  void SetUp() override {
    image_test::SetUp();
    if (call("GET", "/v1/capabilities").body.find("\"gvisor\"") == std::string::npos)
      GTEST_SKIP() << "this control plane offers no gVisor guests";
  }
  sandbox_created create_gvisor(const std::string& image) {
    return create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"],)"
                  R"("rootfs":")" +
                  image + "\"}");
  }
  /// Waits (at most 120 s) until the pool says `n` guests ready.
  bool pool_ready(int n) {
    return eventually(
        [&] {
          return call("GET", "/v1/pool").body.find("\"ready\":" + std::to_string(n)) !=
                 std::string::npos;
        },
        120s, 50ms);
  }
  /// The guests the state dir holds (before any create: the pool's).
  std::set<std::string> guest_dirs() const {
    std::set<std::string> out;
    for (const auto& e : fs::directory_iterator(state_dir_ / "guests"))
      out.insert(e.path().filename().string());
    return out;
  }
  /// A gVisor create of `image` that takes one of the `pooled` guests, started `from` a
  /// snapshot or a boot.
  sandbox_created take(const std::string& image, const std::set<std::string>& pooled,
                       const std::string& from) {
    auto g = create_gvisor(image);
    EXPECT_EQ(pooled.count(g.id), 1u) << "not a pool guest: " << g.id;
    EXPECT_EQ(view(g.id).started_from, from);
    return g;
  }
};

TEST_F(snapshot_fixture, a_snapshot_image_create_restores_rather_than_boots) {
  const auto venv = dir_.path() / "venv";
  make_venv(venv);
  auto r = call("POST", "/v1/images",
                R"({"name":"snap","python_env":)" + quote_json(venv.string()) +
                    R"(,"preload":["marker"],"snapshot":true})");
  auto added = data<image_added>(r);
  EXPECT_TRUE(added.image.snapshot) << r.body;
  EXPECT_TRUE(fs::exists(state_dir_ / "images" / "snap" / "snapshot" / "checkpoint.img"));
  auto listed = data<image_list>(call("GET", "/v1/images"));
  ASSERT_EQ(listed.data.size(), 2u);
  EXPECT_TRUE(listed.data[1].snapshot);

  const std::string probe = "import sys; print('marker' in sys.modules, sys.argv[1:])";
  auto a = create_gvisor("snap");
  EXPECT_EQ(view(a.id).started_from, "snapshot");
  // The first run meets the snapshot's interpreter: the preload is imported already (its
  // print went nowhere), the arguments and exit code are the run's own.
  auto first = exec(a.id, "python3", {"-c", probe, "x"});
  EXPECT_EQ(first.stdout_text, "True ['x']\n") << first.stderr_text;
  EXPECT_EQ(first.exit_code, 0);
  auto procs = exec(a.id, "/bin/sh", {"-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"});
  EXPECT_EQ(procs.stdout_text.find("sleep"), std::string::npos)
      << "the relay's watchdog is gone with it: " << procs.stdout_text;
  auto second = exec(a.id, "python3", {"-c", probe});
  EXPECT_EQ(second.stdout_text, "False []\n") << "a later run is a fresh python3";
  EXPECT_EQ(exec(a.id, "python3", {"-c", "import sys; sys.exit(3)"}).exit_code, 3);
  ASSERT_EQ(exec(a.id, "/bin/sh", {"-c", "echo used > /tmp/mine"}).exit_code, 0);

  // Every create gets its own copy nobody used: not a's /tmp, its own waiting python3.
  auto b = create_gvisor("snap");
  EXPECT_EQ(view(b.id).started_from, "snapshot");
  auto b_first = exec(b.id, "python3",
                      {"-c", "import os, sys; print('marker' in sys.modules, "
                             "os.path.exists('/tmp/mine')); sys.exit(4)"});
  EXPECT_EQ(b_first.stdout_text, "True False\n") << b_first.stderr_text;
  EXPECT_EQ(b_first.exit_code, 4);

  // A first exec the snapshot's python3 does not serve ends it: nothing of it is left.
  auto c = create_gvisor("snap");
  auto ls = exec(c.id, "/bin/sh", {"-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"});
  EXPECT_EQ(ls.stdout_text.find("guestflow-snapshot"), std::string::npos) << ls.stdout_text;

  // A namespaces guest of the image boots as ever.
  auto n = create(R"({"shape":"s-1vcpu-256mb","rootfs":"snap"})");
  EXPECT_EQ(view(n.id).started_from, "");
  for (const auto& id : {a.id, b.id, c.id, n.id})
    ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 200u);
  // Removing the image removes its snapshot.
  ASSERT_EQ(call("DELETE", "/v1/images/snap").status, 200u);
  EXPECT_FALSE(fs::exists(state_dir_ / "images" / "snap"));
}

TEST_F(snapshot_fixture, a_gvisor_pool_of_a_snapshot_image_keeps_restored_copies) {
  const auto venv = dir_.path() / "venv";
  make_venv(venv);
  auto r = call("POST", "/v1/images",
                R"({"name":"snap","python_env":)" + quote_json(venv.string()) +
                    R"(,"preload":["marker"],"snapshot":true})");
  ASSERT_TRUE(data<image_added>(r).image.snapshot) << r.body;
  stop();
  start({"--warm-pool", "s-1vcpu-256mb@snap+gvisor=2"});
  ASSERT_TRUE(pool_ready(2)) << call("GET", "/v1/pool").body;
  const auto pooled = guest_dirs();
  ASSERT_EQ(pooled.size(), 2u);

  // A create of the snapshot image takes a pool guest, restored from the snapshot: its first
  // python3 meets the snapshot's interpreter (the preload imported), nobody's state.
  const std::string probe = "import os, sys; print('marker' in sys.modules, "
                            "os.path.exists('/tmp/mine'), sys.argv[1:])";
  auto a = take("snap", pooled, "snapshot");
  auto first = exec(a.id, "python3", {"-c", probe, "a"});
  EXPECT_EQ(first.stdout_text, "True False ['a']\n") << first.stderr_text;
  ASSERT_EQ(exec(a.id, "/bin/sh", {"-c", "echo used > /tmp/mine"}).exit_code, 0);
  auto b = take("snap", pooled, "snapshot");
  EXPECT_NE(a.id, b.id);
  auto b_first = exec(b.id, "python3", {"-c", probe, "b"});
  EXPECT_EQ(b_first.stdout_text, "True False ['b']\n") << b_first.stderr_text;
  // The pool refills with restored copies, never with the guests it gave away.
  ASSERT_TRUE(pool_ready(2)) << call("GET", "/v1/pool").body;
  auto c = create_gvisor("snap");
  EXPECT_EQ(pooled.count(c.id), 0u);
  EXPECT_EQ(view(c.id).started_from, "snapshot");
  EXPECT_EQ(exec(c.id, "python3", {"-c", probe, "c"}).stdout_text, "True False ['c']\n");
  for (const auto& id : {a.id, b.id, c.id})
    ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 200u);
}

TEST_F(snapshot_fixture, a_gvisor_pool_guests_first_python_run_meets_its_waiting_python3) {
  // No snapshot: the pool starts a python3 of the image's preload in each gVisor guest it
  // builds (through runsc, not the host's /proc), which serves the guest's first run.
  const auto venv = dir_.path() / "venv";
  make_venv(venv);
  auto r = call("POST", "/v1/images",
                R"({"name":"pre","python_env":)" + quote_json(venv.string()) +
                    R"(,"preload":["marker"]})");
  ASSERT_EQ(r.status, 200u) << r.body;
  stop();
  start({"--warm-pool", "s-1vcpu-256mb@pre+gvisor=2"});
  ASSERT_TRUE(pool_ready(2)) << call("GET", "/v1/pool").body;
  const auto pooled = guest_dirs();
  const std::string probe = "import os, sys; print('marker' in sys.modules, "
                            "os.path.exists('/tmp/mine'), sys.argv[1:]); sys.exit(3)";
  auto a = take("pre", pooled, "boot");
  auto first = exec(a.id, "python3", {"-c", probe, "a"});
  EXPECT_EQ(first.stdout_text, "True False ['a']\n") << first.stderr_text;
  EXPECT_EQ(first.exit_code, 3);
  auto second = exec(a.id, "python3", {"-c", probe});
  EXPECT_EQ(second.stdout_text, "False False []\n") << "a later run is a fresh python3";
  // A first exec it does not serve ends it: nothing of it is left in the guest.
  auto b = take("pre", pooled, "boot");
  auto ls = exec(b.id, "/bin/sh", {"-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"});
  EXPECT_EQ(ls.stdout_text.find("guestflow-snapshot"), std::string::npos) << ls.stdout_text;
  EXPECT_EQ(ls.stdout_text.find("python3"), std::string::npos) << ls.stdout_text;
  for (const auto& id : {a.id, b.id})
    ASSERT_EQ(call("DELETE", "/v1/sandboxes/" + id).status, 200u);
}

} // namespace
} // namespace guestflow::testing
