// Persistent guests on a fleet (issue 19, host loss): two real control planes share a
// workspace root and an etcd; a `--reuse flow` component's guest lives on one of them. When
// that node is lost (SIGKILL, its guest's processes killed too: a host gone), the next run
// cold-boots the guest on the other node from the kept workspace once the lost node's lease
// has expired, and the lost node, restarted, forgets the guest instead of starting it. A gVisor
// guest's memory, checkpointed beside the shared workspace, is restored by the other node.
#include "fleet/etcd_client.hpp"
#include "messages/fleet.hpp"
#include "messages/jsend.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/integration/fleet/fleet_fixture.hpp"
#include "tests/support/etcd_process.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/guest_programs.hpp"
#include "tests/support/proc.hpp"

#include <csignal>
#include <fcntl.h>
#include <functional>
#include <iostream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace guestflow;
using namespace guestflow::testing;
using namespace std::chrono_literals;

namespace {

using test_support::counter_program;

/// Pids of the processes in guest `id`'s cgroups (`…/guestflow/<id>`).
std::vector<int> guest_pids(const std::string& id) {
  return test_support::pids_where("cgroup", [&id](const std::string& text) {
    return text.find("/guestflow/" + id + "\n") != std::string::npos ||
           text.find("/guestflow/" + id + "/") != std::string::npos;
  });
}

/// A TCP proxy on loopback in front of etcd, a process of the test's own (python3, owned by
/// its pid): SIGSTOP cuts the node behind it off from etcd while the node itself runs on.
class tcp_proxy {
public:
  explicit tcp_proxy(uint16_t upstream) {
    static constexpr const char* script = R"(
import socket, sys, threading
up = int(sys.argv[1])
ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
print(ls.getsockname()[1], flush=True)
def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
while True:
    c, _ = ls.accept()
    try:
        u = socket.create_connection(("127.0.0.1", up))
    except OSError:
        c.close()
        continue
    threading.Thread(target=pump, args=(c, u), daemon=True).start()
    threading.Thread(target=pump, args=(u, c), daemon=True).start()
)";
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    auto port = std::to_string(upstream);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::execl("/usr/bin/python3", "python3", "-c", script, port.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c = 0;
    while (::read(out[0], &c, 1) == 1 && c != '\n')
      line += c;
    ::close(out[0]);
    port_ = static_cast<uint16_t>(std::stoi(line.empty() ? "0" : line));
    if (!port_) throw std::runtime_error("the proxy did not start");
  }
  ~tcp_proxy() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  tcp_proxy(const tcp_proxy&) = delete;
  tcp_proxy& operator=(const tcp_proxy&) = delete;

  std::string url() const { return "etcd://127.0.0.1:" + std::to_string(port_); }
  void cut() const { ::kill(pid_, SIGSTOP); }
  void mend() const { ::kill(pid_, SIGCONT); }

private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

/// The writer a guest runs on its workspace: `<writer> <n>` lines, n = 0, 1, 2, …, one
/// append every 10 ms until it is killed.
const std::vector<std::string> writer_args(const std::string& writer) {
  return {"-c",
          "i=0; while :; do echo \"$0 $i\" >> /workspace/seq; i=$((i+1)); sleep 0.01; done",
          writer};
}

/// What a sequence file shows: the writers in the order their runs appear, each run's
/// length; fails the test on a line that is not `<writer> <n>`, or a run whose counter is
/// not 0, 1, 2, … (an interleaved or torn write).
std::vector<std::pair<std::string, int>> writer_runs(const std::string& text) {
  std::vector<std::pair<std::string, int>> runs;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line)) {
    auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size()) {
      ADD_FAILURE() << "not a sequence line: '" << line << "'";
      return runs;
    }
    auto who = line.substr(0, sp);
    auto n = std::stoi(line.substr(sp + 1));
    if (runs.empty() || runs.back().first != who) runs.emplace_back(who, 0);
    if (n != runs.back().second) {
      ADD_FAILURE() << "writer " << who << " wrote " << n << " after " << runs.back().second - 1
                    << ": two writers interleaved";
      return runs;
    }
    ++runs.back().second;
  }
  return runs;
}

/// The sequence file of a guest A wrote to, then B: at least 20 lines of A's, then at least
/// 20 of B's, each run unbroken (one writer at a time).
void expect_a_then_b(const std::string& sequence_text) {
  auto runs = writer_runs(sequence_text);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].first, "A");
  EXPECT_GE(runs[0].second, 20);
  EXPECT_EQ(runs[1].first, "B");
  EXPECT_GE(runs[1].second, 20);
}

class persistent_fleet_test : public fleet_fixture {
protected:
  std::unique_ptr<test_support::etcd_process> etcd =
      std::make_unique<test_support::etcd_process>();
  std::filesystem::path root = dir.path() / "shared";
  std::shared_ptr<fleet::etcd_client> etcd_client;

  void SetUp() override {
    std::filesystem::create_directories(root);
    ::chmod(root.c_str(), 0711);
    auto c = fleet::etcd_client::make(etcd->url());
    ASSERT_TRUE(c);
    etcd_client = *c;
  }

  static constexpr std::chrono::seconds ttl{2};

  std::vector<std::string> node_args(const std::string& etcd_url = {}) const {
    return {"--fleet",
            etcd_url.empty() ? etcd->url() : etcd_url,
            "--fleet-ttl-seconds",
            std::to_string(ttl.count()),
            "--workspace-root",
            root.string()};
  }

  /// Creates persistent guest `name` on node `i`; the reply.
  http_reply create_shared(size_t i, const std::string& name) const {
    return http_client{nodes[i]->port()}.call(
        "POST", "/v1/sandboxes",
        R"({"shape":"s-1vcpu-256mb","persistent":true,"name":")" + name + R"("})");
  }

  /// Starts the sequence writer `writer` in guest `id` on node `i` (a streamed exec the
  /// caller holds: it runs until the guest dies or the stream goes).
  std::unique_ptr<http_stream> start_writer(size_t i, const std::string& id,
                                            const std::string& writer) const {
    exec_request req;
    req.cmd = "/bin/sh";
    req.args = writer_args(writer);
    return std::make_unique<http_stream>(http_client{nodes[i]->port()}, "POST",
                                         "/v1/sandboxes/" + id + "/exec?stream=true",
                                         encode(req));
  }

  /// The sequence file as guest `id` on node `i` reads it ("" when unreadable).
  std::string sequence(size_t i, const std::string& id) const {
    exec_request req;
    req.cmd = "/bin/sh";
    req.args = {"-c", "cat /workspace/seq 2>/dev/null || true"};
    auto reply = http_client{nodes[i]->port()}.call("POST", "/v1/sandboxes/" + id + "/exec",
                                                    encode(req));
    if (reply.status != 200) return "";
    auto env = decode<jsend>(reply.body);
    if (!env) return "";
    auto r = decode<exec_result>(env->data.text);
    return r ? r->stdout_text : "";
  }

  /// Lines of `writer` in the sequence read from guest `id` on node `i`.
  size_t lines_of(size_t i, const std::string& id, const std::string& writer) const {
    auto text = sequence(i, id);
    size_t n = 0;
    for (size_t at = 0; (at = text.find(writer + " ", at)) != std::string::npos; ++at)
      if (at == 0 || text[at - 1] == '\n') ++n;
    return n;
  }

  size_t registered() const {
    auto r = etcd_client->range(std::string{fleet_nodes_prefix});
    return r ? r->size() : 0;
  }

  /// One keyed run of the counter program through the fleet (etcd); its stdout.
  std::string count() {
    cli_run run{{"component", "--flow-id", "flow-f", "--component-id", "counter", "--reuse",
                 "flow", "--python", file("count.py", counter_program)},
                env("runtime", {{"GUESTFLOW_FLEET", etcd->url()}}),
                dir.path()};
    auto o = run.wait(120s);
    EXPECT_EQ(o.status, 0) << o.err;
    return o.out;
  }

  /// The owner key's node ("" when absent).
  std::string owner_of(const std::string& name) const {
    auto kv = etcd_client->get("/guestflow/owners/" + name);
    if (!kv || !kv->has_value()) return "";
    return (*kv)->value.substr(0, (*kv)->value.find(' '));
  }
};

TEST_F(persistent_fleet_test, a_lost_nodes_guest_cold_boots_on_the_other_node_and_stays_there) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_EQ(drain(1, true), 200u); // the guest is made on node A
  ASSERT_EQ(count(), "1\n");
  ASSERT_EQ(drain(1, false), 200u);
  for (auto want : {"2\n", "3\n", "4\n"})
    ASSERT_EQ(count(), want);
  auto on_a = live(0);
  ASSERT_EQ(on_a.size(), 1u);
  ASSERT_TRUE(live(1).empty());
  const auto id_a = on_a[0].id, name = on_a[0].name;
  EXPECT_TRUE(on_a[0].persistent);
  EXPECT_EQ(owner_of(name), "node-a");
  EXPECT_TRUE(std::filesystem::exists(root / name / "spec.json"));
  // Fenced: while A's lease is live, node B refuses to build the guest (nothing made there).
  {
    http_client http{nodes[1]->port()};
    auto refused = http.call("POST", "/v1/sandboxes",
                             R"({"shape":")" + on_a[0].shape +
                                 R"(","persistent":true,"name":")" + name + R"("})");
    EXPECT_EQ(refused.status, 409u) << refused.body;
    EXPECT_NE(refused.body.find("is owned by node node-a"), std::string::npos) << refused.body;
    EXPECT_TRUE(live(1).empty());
    EXPECT_EQ(owner_of(name), "node-a");
  }

  // Host loss: node A and its guest's processes killed.
  kill_node(0);
  for (int pid : guest_pids(id_a))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return guest_pids(id_a).empty(); }, 20s));
  // Never while A's lease is live: the owner key goes with it (TTL 2 s).
  ASSERT_TRUE(test_support::eventually([&] { return owner_of(name).empty(); }, 20s, 50ms));
  auto cold = std::chrono::steady_clock::now();
  ASSERT_EQ(count(), "5\n"); // cold-booted on node B from the kept workspace
  std::cerr << "the run after the loss took "
            << std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::now() - cold)
                   .count()
            << " ms\n";
  auto on_b = live(1);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_b[0].name, name);
  EXPECT_EQ(on_b[0].status, sandbox_status::running);
  EXPECT_EQ(owner_of(name), "node-b");

  // Node A back: it finds the guest owned by B and forgets it (never starts it again).
  restart_node(0);
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_TRUE(test_support::eventually([&] { return live(0).empty(); }, 20s, 100ms));
  for (auto& v : records(0)) {
    if (v.id == id_a) {
      EXPECT_EQ(v.status, sandbox_status::destroyed);
    }
  }
  EXPECT_TRUE(guest_pids(id_a).empty());
  EXPECT_EQ(count(), "6\n");
  EXPECT_EQ(live(1).at(0).status, sandbox_status::running);
  EXPECT_EQ(owner_of(name), "node-b");
  EXPECT_TRUE(std::filesystem::exists(root / name / "spec.json")) << "B's workspace kept";
}

TEST_F(persistent_fleet_test, a_takeover_keeps_the_guests_service_urls_and_their_secret) {
  // An API key on both nodes: without one a service URL asks for no token at all.
  const std::string key = "k-fleet-ingress";
  auto keyed = node_args();
  keyed.insert(keyed.end(), {"--api-key", key});
  start_node("node-a", keyed);
  start_node("node-b", keyed);
  // On any way out both nodes run again without the key: TearDown's clean-up uses none.
  struct on_exit {
    std::function<void()> f;
    ~on_exit() { f(); }
  } restore{[this] {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i]) kill_node(i);
      auto args = node_args();
      args.insert(args.begin(), {"--node", names[i]});
      restart_node(i, args);
    }
  }};
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string body = R"({"shape":"s-1vcpu-256mb","persistent":true,"name":"web-1",)"
                           R"("egress":["240.0.0.0/4"],"ingress_enabled":true})";
  auto made_on = [&](size_t i) {
    auto r = http_client{nodes[i]->port(), key}.call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 200u) << r.body;
    auto env = decode<jsend>(r.body);
    auto created = env ? decode<sandbox_created>(env->data.text) : failure{};
    return created ? *created : sandbox_created{};
  };
  auto serve_site = [&](size_t i, const std::string& id) {
    http_client api{nodes[i]->port(), key};
    http_reply put;
    // Polled: a node just restarted may answer 429 until it holds its fleet lease again.
    ASSERT_TRUE(test_support::eventually(
        [&] {
          put = api.call("PUT", "/v1/sandboxes/" + id + "/files?path=/workspace/hi.txt", "hi");
          return put.status == 200;
        },
        30s, 100ms))
        << put.status << " " << put.body;
    exec_request req;
    req.cmd = "/bin/sh";
    req.args = {"-c", "cd /workspace && setsid python3 -m http.server 8000 --bind 127.0.0.1 "
                      ">/dev/null 2>&1 </dev/null &"};
    ASSERT_EQ(api.call("POST", "/v1/sandboxes/" + id + "/exec", encode(req)).status, 200u);
  };
  // The file through node `i`'s URL naming `id`, with `token`; the status ("hi" on 200).
  auto fetch = [&](size_t i, const std::string& id, const std::string& token) {
    auto r =
        http_client{nodes[i]->port()}.call("GET", "/v1/sandboxes/" + id + "/ports/8000/hi.txt",
                                           {}, {{"X-Guestflow-Ingress-Token", token}}, 10s);
    if (r.status == 200) EXPECT_EQ(r.body, "hi");
    return r.status;
  };
  auto on_a = made_on(0);
  ASSERT_FALSE(on_a.ingress_secret.empty());
  serve_site(0, on_a.id);
  ASSERT_TRUE(test_support::eventually(
      [&] { return fetch(0, on_a.id, on_a.ingress_secret) == 200; }, 20s, 50ms));

  // Host loss: node A and its guest gone; B takes the guest over once A's lease expired.
  kill_node(0);
  for (int pid : guest_pids(on_a.id))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return owner_of("web-1").empty(); }, 20s, 50ms));
  auto on_b = made_on(1);
  ASSERT_FALSE(on_b.id.empty());
  EXPECT_NE(on_b.id, on_a.id);
  EXPECT_EQ(on_b.ingress_secret, on_a.ingress_secret) << "the takeover made a new secret";
  serve_site(1, on_b.id); // its processes went with node A: the app is started again
  // The old URL (the id A gave) and the new one both open with the old secret; a wrong
  // token does not.
  EXPECT_TRUE(test_support::eventually(
      [&] { return fetch(1, on_b.id, on_a.ingress_secret) == 200; }, 20s, 50ms));
  EXPECT_EQ(fetch(1, on_a.id, on_a.ingress_secret), 200u) << "the old URL is not served";
  EXPECT_EQ(fetch(1, on_a.id, std::string(43, 'A')), 401u);
  // Node B restarted (its aliases in memory gone): the old URL still names the guest, from
  // the file beside the shared workspace (its first request may wake it: 502 until the app
  // runs again, never 404).
  kill_node(1);
  auto b_keyed = keyed;
  b_keyed.insert(b_keyed.begin(), {"--node", "node-b"});
  restart_node(1, b_keyed);
  unsigned first = 0;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        try {
          first = fetch(1, on_a.id, on_a.ingress_secret);
          return first != 0 && first != 503;
        } catch (const std::exception&) {
          return false;
        }
      },
      60s, 100ms));
  EXPECT_NE(first, 404u) << "after a restart the old URL names no guest";
  serve_site(1, on_b.id);
  EXPECT_TRUE(test_support::eventually(
      [&] { return fetch(1, on_a.id, on_a.ingress_secret) == 200; }, 30s, 100ms));
  // Deleted: its directory under the root goes whole, the kept secret with it.
  EXPECT_EQ(
      http_client(nodes[1]->port(), key).call("DELETE", "/v1/sandboxes/" + on_b.id).status,
      200u);
  EXPECT_FALSE(std::filesystem::exists(root / "web-1" / "ingress"));
  EXPECT_FALSE(std::filesystem::exists(root / "web-1"));
}

TEST_F(persistent_fleet_test,
       a_takeover_whose_kept_image_was_removed_is_not_found_and_frees_it) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string body = R"({"shape":"s-1vcpu-256mb","persistent":true,"name":"kept-1"})";
  auto made = http_client{nodes[0]->port()}.call("POST", "/v1/sandboxes", body);
  ASSERT_EQ(made.status, 200u) << made.body;
  auto id_a = live(0).at(0).id;
  ASSERT_TRUE(std::filesystem::exists(root / "kept-1" / "workspace.ext4"));
  kill_node(0);
  for (int pid : guest_pids(id_a))
    ::kill(pid, SIGKILL);
  ASSERT_TRUE(test_support::eventually([&] { return owner_of("kept-1").empty(); }, 20s, 50ms));
  std::filesystem::remove(root / "kept-1" / "workspace.ext4");
  auto refused = http_client{nodes[1]->port()}.call("POST", "/v1/sandboxes", body);
  EXPECT_EQ(refused.status, 404u) << refused.body;
  EXPECT_NE(refused.body.find("workspace image"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("is gone"), std::string::npos) << refused.body;
  EXPECT_TRUE(live(1).empty());
  EXPECT_EQ(owner_of("kept-1"), "") << "a failed takeover lets ownership go";
  EXPECT_TRUE(std::filesystem::exists(root / "kept-1" / "spec.json")) << "nothing else lost";
  restart_node(0); // its record goes with TearDown
}

TEST_F(persistent_fleet_test,
       a_live_node_cut_off_from_etcd_stops_its_writer_before_the_other_node_takes_over) {
  tcp_proxy proxy{etcd->client_port()};
  start_node("node-a", node_args(proxy.url())); // A reaches etcd only through the proxy
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string name = "seq-fenced";
  auto made = create_shared(0, name);
  ASSERT_EQ(made.status, 200u) << made.body;
  const auto id_a = live(0).at(0).id;
  ASSERT_EQ(owner_of(name), "node-a");
  auto writer_a = start_writer(0, id_a, "A");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(0, id_a, "A") >= 20; }, 30s));

  // Cut A off from etcd; A itself, its guest and its writer run on.
  proxy.cut();
  const auto cut = std::chrono::steady_clock::now();
  auto since_cut = [&] { return std::chrono::steady_clock::now() - cut; };
  // A fences itself and stops its shared guest before its lease can expire: the moment the
  // owner key goes, A's guest is already gone.
  ASSERT_TRUE(test_support::eventually([&] { return owner_of(name).empty(); }, 20s, 20ms));
  const auto freed = since_cut();
  EXPECT_TRUE(guest_pids(id_a).empty()) << "A's guest still ran when its lease expired";
  // Not before the lease could have expired (renewed at most TTL/3 before the cut), and no
  // later than the TTL plus etcd's expiry tick (500 ms) and this poll.
  EXPECT_GE(freed, ttl * 2 / 3);
  EXPECT_LE(freed, ttl + 1s);
  auto view_a = live(0);
  ASSERT_EQ(view_a.size(), 1u);
  EXPECT_EQ(view_a[0].status, sandbox_status::stopped);

  // B cold-boots the workspace from the shared root and its writer goes on from there.
  auto took = create_shared(1, name);
  ASSERT_EQ(took.status, 200u) << took.body;
  const auto recovered = since_cut();
  const auto id_b = live(1).at(0).id;
  EXPECT_EQ(owner_of(name), "node-b");
  // The recovery bound: the lease TTL (+ etcd's expiry tick) + a cold boot (3 s on this
  // shared 2-core host; 0.2 s idle).
  EXPECT_LE(recovered, ttl + 1s + 3s)
      << std::chrono::duration_cast<std::chrono::milliseconds>(recovered).count() << " ms";
  auto writer_b = start_writer(1, id_b, "B");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(1, id_b, "B") >= 20; }, 30s));
  writer_b.reset();

  // One writer at a time: all of A's appends, then B's, never interleaved or torn.
  ASSERT_NO_FATAL_FAILURE(expect_a_then_b(sequence(1, id_b)));

  // A back in touch with etcd: it registers again and forgets the guest B owns now.
  proxy.mend();
  ASSERT_TRUE(test_support::eventually([&] { return live(0).empty(); }, 30s, 100ms));
  EXPECT_EQ(owner_of(name), "node-b");
}

TEST_F(persistent_fleet_test,
       a_shared_guest_dies_with_its_control_plane_before_the_other_node_takes_over) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string name = "seq-orphan";
  auto made = create_shared(0, name);
  ASSERT_EQ(made.status, 200u) << made.body;
  const auto id_a = live(0).at(0).id;
  auto writer_a = start_writer(0, id_a, "A");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(0, id_a, "A") >= 20; }, 30s));
  ASSERT_FALSE(guest_pids(id_a).empty());

  // Only A's control-plane process dies; the host, etcd and A's guest processes remain.
  kill_node(0);
  const auto killed = std::chrono::steady_clock::now();
  writer_a.reset();
  // The guest goes with it, well before A's lease can expire (⅔ TTL at the earliest).
  ASSERT_TRUE(
      test_support::eventually([&] { return guest_pids(id_a).empty(); }, ttl * 2 / 3, 10ms))
      << "A's guest outlived its control plane";
  ASSERT_LT(std::chrono::steady_clock::now() - killed, ttl * 2 / 3);
  ASSERT_FALSE(owner_of(name).empty()) << "A's lease outlived by its guest, not the reverse";

  // B takes over once A's lease expired, and only then; the sequence shows one writer at a
  // time.
  ASSERT_TRUE(test_support::eventually([&] { return owner_of(name).empty(); }, 20s, 20ms));
  EXPECT_TRUE(guest_pids(id_a).empty());
  auto took = create_shared(1, name);
  ASSERT_EQ(took.status, 200u) << took.body;
  EXPECT_LE(std::chrono::steady_clock::now() - killed, ttl + 1s + 3s);
  const auto id_b = live(1).at(0).id;
  auto writer_b = start_writer(1, id_b, "B");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(1, id_b, "B") >= 20; }, 30s));
  writer_b.reset();
  ASSERT_NO_FATAL_FAILURE(expect_a_then_b(sequence(1, id_b)));

  // A restarted: its guest (stopped by the kill) is B's now; A forgets it, never starts it.
  restart_node(0);
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  ASSERT_TRUE(test_support::eventually([&] { return live(0).empty(); }, 30s, 100ms));
  EXPECT_EQ(owner_of(name), "node-b");
  EXPECT_GE(lines_of(1, id_b, "B"), 20u);
}

TEST_F(persistent_fleet_test, a_hung_nodes_guest_stops_before_the_other_node_takes_over) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string name = "seq-hung";
  auto made = create_shared(0, name);
  ASSERT_EQ(made.status, 200u) << made.body;
  const auto id_a = live(0).at(0).id;
  auto writer_a = start_writer(0, id_a, "A");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(0, id_a, "A") >= 20; }, 30s));

  // A's control plane hangs (SIGSTOP: alive, holding every descriptor, renewing nothing);
  // its guest's processes run on unless something outside the hung process stops them.
  ASSERT_EQ(::kill(nodes[0]->pid(), SIGSTOP), 0);
  const auto hung = std::chrono::steady_clock::now();
  auto resume = [&] { ::kill(nodes[0]->pid(), SIGCONT); };
  // The guest stops before A's lease can expire (⅔ TTL at the earliest after the last
  // renewal): the moment the owner key goes, A's guest is gone.
  bool freed = test_support::eventually([&] { return owner_of(name).empty(); }, 20s, 20ms);
  bool guest_gone = guest_pids(id_a).empty();
  if (!freed || !guest_gone) resume();
  ASSERT_TRUE(freed) << "A's lease never expired";
  ASSERT_TRUE(guest_gone) << "a hung node's guest still ran when its lease expired";
  EXPECT_LE(std::chrono::steady_clock::now() - hung, ttl + 1s);

  // B cold-boots the workspace and writes on while A is still hung.
  auto took = create_shared(1, name);
  if (took.status != 200u) resume();
  ASSERT_EQ(took.status, 200u) << took.body;
  const auto id_b = live(1).at(0).id;
  EXPECT_EQ(owner_of(name), "node-b");
  auto writer_b = start_writer(1, id_b, "B");
  bool b_wrote = test_support::eventually([&] { return lines_of(1, id_b, "B") >= 20; }, 30s);

  // A resumes: it must not write again (its guest is gone, its lease lost), and it forgets
  // the guest B owns now.
  resume();
  writer_a.reset();
  ASSERT_TRUE(b_wrote);
  ASSERT_TRUE(test_support::eventually([&] { return live(0).empty(); }, 30s, 100ms));
  EXPECT_TRUE(guest_pids(id_a).empty());
  auto after = lines_of(1, id_b, "B");
  ASSERT_TRUE(
      test_support::eventually([&] { return lines_of(1, id_b, "B") >= after + 20; }, 30s));
  writer_b.reset();
  ASSERT_NO_FATAL_FAILURE(expect_a_then_b(sequence(1, id_b)));
  EXPECT_EQ(owner_of(name), "node-b");
}

TEST_F(persistent_fleet_test, etcd_down_past_the_lease_stops_shared_guests_and_recovers) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  const std::string name = "seq-etcd-down";
  auto made = create_shared(0, name);
  ASSERT_EQ(made.status, 200u) << made.body;
  const auto id_a = live(0).at(0).id;
  // A disposable guest placed on node B before the outage.
  http_client b{nodes[1]->port()};
  auto scratch = b.call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb"})");
  ASSERT_EQ(scratch.status, 200u) << scratch.body;
  auto scratch_id = decode<sandbox_created>(decode<jsend>(scratch.body)->data.text)->id;
  auto writer_a = start_writer(0, id_a, "A");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(0, id_a, "A") >= 20; }, 30s));

  // etcd down for three TTLs: every node fences and stops its shared guests before a lease
  // could expire (etcd keeps the leases while down, and a restarted etcd gives each its full
  // TTL again: another node could take over at once).
  etcd->stop();
  const auto down = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      test_support::eventually([&] { return guest_pids(id_a).empty(); }, ttl + 1s, 20ms))
      << "a shared guest ran on with etcd down";
  EXPECT_LE(std::chrono::steady_clock::now() - down, ttl);
  writer_a.reset();
  EXPECT_TRUE(test_support::eventually(
      [&] { return live(0).at(0).status == sandbox_status::stopped; }, 10s, 50ms));
  // Runs go on on what is already placed: the disposable guest answers.
  exec_request echo;
  echo.cmd = "echo";
  echo.args = {"still here"};
  auto ran = b.call("POST", "/v1/sandboxes/" + scratch_id + "/exec", encode(echo));
  ASSERT_EQ(ran.status, 200u) << ran.body;
  EXPECT_EQ(decode<exec_result>(decode<jsend>(ran.body)->data.text)->stdout_text,
            "still here\n");
  std::this_thread::sleep_until(down + 3 * ttl); // the outage's length, not a wait
  EXPECT_TRUE(guest_pids(id_a).empty());

  // etcd back: both nodes register again, and the shared guest runs again on its owner
  // (woken by its next exec), its sequence going on with one writer at a time.
  etcd->restart();
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  std::string last;
  ASSERT_TRUE(test_support::eventually(
      [&] {
        exec_request probe;
        probe.cmd = "true";
        auto r = http_client{nodes[0]->port()}.call("POST", "/v1/sandboxes/" + id_a + "/exec",
                                                    encode(probe));
        last = r.body;
        return r.status == 200u;
      },
      30s, 200ms))
      << "the shared guest never ran again: " << last;
  EXPECT_EQ(owner_of(name), "node-a");
  auto writer_b = start_writer(0, id_a, "B");
  ASSERT_TRUE(test_support::eventually([&] { return lines_of(0, id_a, "B") >= 20; }, 30s));
  writer_b.reset();
  ASSERT_NO_FATAL_FAILURE(expect_a_then_b(sequence(0, id_a)));
  // Node B never built it.
  EXPECT_EQ(live(1).size(), 1u) << "only the disposable guest";
  b.call("DELETE", "/v1/sandboxes/" + scratch_id);
}

TEST_F(persistent_fleet_test, a_missing_or_unfleeted_workspace_root_is_refused_at_start) {
  auto run = [&](std::vector<std::string> args) {
    std::vector<std::string> all{"control-plane", "--state-dir",
                                 (dir.path() / "refused").string()};
    all.insert(all.end(), args.begin(), args.end());
    cli_run r{all, {}, dir.path()};
    return r.wait(30s);
  };
  auto missing = run({"--fleet", etcd->url(), "--workspace-root", (root / "nope").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(
      missing.err.find("--workspace-root: " + (root / "nope").string() + " does not exist"),
      std::string::npos)
      << missing.err;
  auto alone = run({"--workspace-root", root.string()});
  EXPECT_EQ(alone.status, 2);
  EXPECT_NE(alone.err.find("--workspace-root needs --fleet"), std::string::npos) << alone.err;
}

TEST_F(persistent_fleet_test, a_gvisor_guests_memory_restores_on_the_other_node_after_fencing) {
  start_node("node-a", node_args());
  start_node("node-b", node_args());
  ASSERT_TRUE(test_support::eventually([&] { return registered() == 2; }, 30s));
  auto caps = http_client{nodes[0]->port()}.call("GET", "/v1/capabilities");
  if (caps.body.find("\"gvisor\"") == std::string::npos) GTEST_SKIP() << "no gVisor here";
  // Deny-all: runsc checkpoints no sandbox on the host's network stack.
  const std::string body = R"({"shape":"s-1vcpu-256mb","persistent":true,"name":"gv-1",)"
                           R"("isolation":"gvisor","egress":["240.0.0.0/4"]})";
  auto made = http_client{nodes[0]->port()}.call("POST", "/v1/sandboxes", body);
  ASSERT_EQ(made.status, 200u) << made.body;
  const auto id_a = live(0).at(0).id;
  // A counter whose token is drawn once: only the same interpreter goes on with it.
  const std::string counter =
      "import os, time\ntoken = os.urandom(8).hex()\ni = 0\nwhile True:\n"
      "    open('/workspace/c.tmp', 'w').write('%d %s' % (i, token))\n"
      "    os.replace('/workspace/c.tmp', '/workspace/c')\n    i += 1\n    time.sleep(0.02)\n";
  auto started = http_client{nodes[0]->port()}.call(
      "POST", "/v1/sandboxes/" + id_a + "/exec",
      R"({"cmd":"/bin/sh","args":["-c","python3 -c \"$0\" </dev/null >/dev/null 2>&1 &",)" +
          quote_json(counter) + "]}");
  ASSERT_EQ(started.status, 200u) << started.body;
  auto read = [&](size_t node, const std::string& id) {
    auto r = http_client{nodes[node]->port()}.call("GET", "/v1/sandboxes/" + id +
                                                              "/files?path=/workspace/c");
    std::pair<long, std::string> out{-1, ""};
    if (r.status == 200u) {
      std::istringstream in{r.body};
      in >> out.first >> out.second;
    }
    return out;
  };
  std::pair<long, std::string> before;
  ASSERT_TRUE(
      test_support::eventually([&] { return (before = read(0, id_a)).first > 3; }, 30s));
  // Node A stops the guest (its memory checkpointed beside the shared workspace), then is lost.
  auto stopped = http_client{nodes[0]->port()}.call("POST", "/v1/sandboxes/" + id_a + "/stop");
  ASSERT_EQ(stopped.status, 200u) << stopped.body;
  EXPECT_TRUE(std::filesystem::exists(root / "gv-1" / "checkpoint" / "checkpoint.img"));
  kill_node(0);
  ASSERT_TRUE(test_support::eventually([&] { return owner_of("gv-1").empty(); }, 20s, 50ms));
  // Node B takes it over once A's lease is gone, from A's checkpoint: the counter goes on.
  auto taken = http_client{nodes[1]->port()}.call("POST", "/v1/sandboxes", body);
  ASSERT_EQ(taken.status, 200u) << taken.body;
  auto on_b = live(1);
  ASSERT_EQ(on_b.size(), 1u);
  EXPECT_EQ(on_b[0].started_from, "checkpoint");
  EXPECT_FALSE(on_b[0].restore_error);
  auto first = read(1, on_b[0].id);
  EXPECT_EQ(first.second, before.second) << "the same interpreter";
  EXPECT_GE(first.first, before.first) << "its value continued";
  EXPECT_TRUE(
      test_support::eventually([&] { return read(1, on_b[0].id).first > first.first; }, 20s))
      << "and it runs on node B";
  EXPECT_EQ(owner_of("gv-1"), "node-b");
  restart_node(0); // its record goes with TearDown
}

} // namespace
