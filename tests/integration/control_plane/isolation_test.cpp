// Isolation seen through the API, on both guest kinds: deny-all guests reach nothing, not
// even the host's loopback; link-local (the metadata service range) is blocked for every
// guest; the escape list (mount, unshare, setuid, ptrace, netlink, a sibling's files, /proc,
// host ports) fails in both; what differs is tested as a difference (which kernel answers).
// An isolation the control plane cannot give is refused, naming it.
#include "tests/integration/control_plane/fixture.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using control_plane_isolation = both_kinds_test;
using control_plane_isolation_host = control_plane_test;

/// A TCP listener on 127.0.0.1:0 that counts the connections it could accept.
class loopback_listener {
public:
  loopback_listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd_, 16);
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~loopback_listener() { ::close(fd_); }
  uint16_t port() const { return port_; }
  /// Connects from the host (the test process), then returns accepted().
  int connect_and_count() {
    int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port_);
    int rc = ::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::close(c);
    return rc == 0 ? accepted() : -1;
  }
  int accepted() {
    int n = 0;
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0; ++n)
      ::close(c);
    return n;
  }

private:
  int fd_ = -1;
  uint16_t port_ = 0;
};

/// Python run in the guest: tries each HOST:PORT, prints "HOST:PORT open|blocked".
std::string probe(const std::vector<std::string>& targets) {
  std::string list;
  for (const auto& t : targets)
    list += (list.empty() ? "" : ",") + std::string{"'"} + t + "'";
  return "import socket\n"
         "for t in [" +
         list +
         "]:\n"
         "    h, p = t.rsplit(':', 1)\n"
         "    try:\n"
         "        socket.create_connection((h, int(p)), timeout=2).close(); print(t, 'open')\n"
         "    except OSError as e:\n"
         "        print(t, 'blocked')\n";
}

TEST_P(control_plane_isolation, deny_all_guest_cannot_reach_a_host_loopback_server) {
  loopback_listener server;
  auto host = "127.0.0.1:" + std::to_string(server.port());
  // The listener is reachable from the host itself, so "blocked" below means isolation.
  ASSERT_EQ(server.connect_and_count(), 1);
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(to_strings(g.egress), (std::vector<std::string>{"240.0.0.0/4"}));
  auto r = exec(g.id, "/usr/bin/python3", {"-c", probe({host, "10.0.2.2:80", "192.0.2.1:80"})});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stdout_text, host + " blocked\n10.0.2.2:80 blocked\n192.0.2.1:80 blocked\n");
  EXPECT_EQ(server.accepted(), 0) << "the guest reached the host's loopback";
  // The guest sees only its own loopback interface.
  auto ifs = exec(g.id, "/bin/cat", {"/proc/net/dev"});
  EXPECT_EQ(ifs.stdout_text.find("eth"), std::string::npos) << ifs.stdout_text;
  EXPECT_EQ(ifs.stdout_text.find("veth"), std::string::npos) << ifs.stdout_text;
}

TEST_P(control_plane_isolation, link_local_metadata_range_is_blocked) {
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  ASSERT_TRUE(caps.link_local_blocked);
  std::vector<std::string> bodies = {R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})"};
  if (caps.supports_address_egress_rules) {
    bodies.push_back(R"({"shape":"s-1vcpu-256mb"})"); // allow all
    bodies.push_back(R"({"shape":"s-1vcpu-256mb","egress":["10.0.0.0/8:443"]})");
  }
  loopback_listener server;
  for (const auto& body : bodies) {
    auto g = create(body);
    auto r = exec(
        g.id, "/usr/bin/python3",
        {"-c", probe({"169.254.169.254:80", "127.0.0.1:" + std::to_string(server.port())})});
    EXPECT_EQ(r.stdout_text.find("169.254.169.254:80 blocked"), 0u)
        << body << ": " << r.stdout_text << r.stderr_text;
  }
  EXPECT_EQ(server.accepted(), 0) << "a guest reached the host's loopback";
}

/// Each escape attempt and what it got: "<name> <errno name or ok>".
const char* escape_probe = R"(import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def res(rc):
    return 'ok' if rc == 0 else errno.errorcode.get(ctypes.get_errno(), '?')
print('mount', res(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)))
print('unshare_mnt', res(libc.unshare(0x00020000)))
print('ptrace_host_pid', res(libc.ptrace(16, 4000000, None, None)))
try:
    os.setuid(0); print('setuid ok')
except OSError as e:
    print('setuid', errno.errorcode[e.errno])
try:
    print('interfaces', ','.join(sorted(n for _, n in socket.if_nameindex())))
except OSError as e:
    print('interfaces', errno.errorcode[e.errno])
pids = [p for p in os.listdir('/proc') if p.isdigit()]
print('few_pids', len(pids) < 16)
print('init', open('/proc/1/cmdline').read().split('\0')[0])
found = []
for p in pids:
    try:
        found.append(open('/proc/%s/root/workspace/secret' % p).read())
    except OSError:
        pass
for path in SIBLING_PATHS:
    try:
        found.append(open(path).read())
    except OSError:
        pass
print('sibling_secret', 'a-secret' in found)
)";

TEST_P(control_plane_isolation, the_escape_list_fails) {
  auto a = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  auto b = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  ASSERT_EQ(put_file(a.id, "/workspace/secret", "a-secret").status, 200u);
  // Where a's file is on the host, as b would have to name it.
  auto ws = (state_dir_ / "guests" / a.id / "workspace").string();
  std::string script = escape_probe;
  script.replace(script.find("SIBLING_PATHS"), 13,
                 "['" + ws + "/secret', '/proc/1/root" + ws + "/secret']");
  auto r = exec(b.id, "/usr/bin/python3", {"-c", script});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("mount EPERM\n"), std::string::npos) << r.stdout_text;
  // A namespace guest's seccomp filter refuses unshare; gVisor's Sentry makes the mount
  // namespace in its own kernel (the host kernel never sees it) and mount stays refused.
  if (!gvisor()) {
    EXPECT_NE(r.stdout_text.find("unshare_mnt EPERM\n"), std::string::npos) << r.stdout_text;
  }
  EXPECT_NE(r.stdout_text.find("ptrace_host_pid E"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("ptrace_host_pid ok"), std::string::npos) << r.stdout_text;
  // EPERM; EINVAL in a namespace guest, whose user namespace maps no uid 0 at all.
  EXPECT_NE(r.stdout_text.find("setuid E"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("setuid ok"), std::string::npos) << r.stdout_text;
  // Netlink shows the guest's loopback only (a namespace guest's filter may refuse it).
  EXPECT_TRUE(r.stdout_text.find("interfaces lo\n") != std::string::npos ||
              r.stdout_text.find("interfaces EPERM\n") != std::string::npos)
      << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("few_pids True\n"), std::string::npos) << r.stdout_text;
  EXPECT_NE(r.stdout_text.find("sibling_secret False\n"), std::string::npos) << r.stdout_text;
  // pid 1 is the guest's own init, not the host's.
  EXPECT_EQ(r.stdout_text.find("init /sbin/init"), std::string::npos) << r.stdout_text;
  EXPECT_EQ(r.stdout_text.find("init /lib/systemd"), std::string::npos) << r.stdout_text;
}

TEST_P(control_plane_isolation, the_kernel_that_answers_is_the_kinds_own) {
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  auto r = exec(g.id, "/bin/cat", {"/proc/version"});
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  utsname host{};
  ::uname(&host);
  // A namespace guest talks to the host kernel; a gVisor guest to gVisor's Sentry, which
  // says it is Linux 4.4.0 whatever the host runs.
  const bool host_kernel =
      r.stdout_text.find(std::string{"Linux version "} + host.release) != std::string::npos;
  EXPECT_EQ(host_kernel, !gvisor()) << r.stdout_text;
  // The guest's view says which kind it is (checked by create() too).
  EXPECT_EQ(view(g.id).isolation, isolation_);
}

GUESTFLOW_BOTH_KINDS(control_plane_isolation);

TEST_F(control_plane_isolation_host, an_isolation_it_cannot_give_is_refused_naming_it) {
  auto before = sandbox_total();
  expect_refusal(
      call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb","isolation":"firecracker"})"),
      400, "firecracker");
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_EQ(caps.isolations, (std::vector<std::string>{"namespaces", "gvisor"}));
  // Without runsc: not offered, and a create asking for it is refused naming the package,
  // never made as a namespace guest instead.
  stop();
  start({}, {{"GUESTFLOW_RUNSC", "/nonexistent/runsc"}});
  caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_EQ(caps.isolations, (std::vector<std::string>{"namespaces"}));
  expect_refusal(
      call("POST", "/v1/sandboxes", R"({"shape":"s-1vcpu-256mb","isolation":"gvisor"})"), 503,
      "Debian package runsc");
  EXPECT_EQ(sandbox_total(), before);
  EXPECT_EQ(workspace_count(), 0u);
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "gvisor")) << "nothing of a gVisor guest";
}

} // namespace
} // namespace guestflow::testing

namespace guestflow::testing {
namespace {

TEST_F(control_plane_isolation_host,
       a_restart_adopts_gvisor_guests_and_drops_stray_runsc_state) {
  // What a crash between a teardown's kill and its removal leaves: runsc state no record
  // names, no process in its cgroups.
  const auto stray = state_dir_ / "gvisor" / "sb-0123456789abcdef";
  std::filesystem::create_directories(stray / "state");
  auto g = create(R"({"shape":"s-1vcpu-256mb","isolation":"gvisor","egress":["240.0.0.0/4"]})");
  ASSERT_EQ(put_file(g.id, "/workspace/kept", "before").status, 200u);
  stop();
  start();
  EXPECT_FALSE(std::filesystem::exists(stray));
  EXPECT_TRUE(std::filesystem::exists(state_dir_ / "gvisor" / g.id));
  // Adopted as what it is: its exec and files still go through runsc and its gofer.
  EXPECT_EQ(view(g.id).isolation, "gvisor");
  auto r = exec(g.id, "/bin/cat", {"/workspace/kept", "/proc/version"});
  EXPECT_EQ(r.stdout_text.rfind("before", 0), 0u) << r.stdout_text << r.stderr_text;
  EXPECT_NE(r.stdout_text.find("4.4.0"), std::string::npos) << r.stdout_text;
  ASSERT_EQ(data<sandbox_deleted>(call("DELETE", "/v1/sandboxes/" + g.id)).status,
            sandbox_status::destroyed);
  EXPECT_FALSE(std::filesystem::exists(state_dir_ / "gvisor" / g.id));
  EXPECT_TRUE(eventually([&] { return guest_pids(g.id).empty(); }));
}

TEST_F(control_plane_isolation_host, without_nftables_rules_are_refused_not_run_open) {
  stop();
  start({"--nft-path", "/nonexistent/nft"});
  auto caps = data<capabilities>(call("GET", "/v1/capabilities"));
  EXPECT_FALSE(caps.supports_address_egress_rules);
  auto before = sandbox_total();
  for (const std::string body :
       {R"({"shape":"s-1vcpu-256mb"})", R"({"shape":"s-1vcpu-256mb","egress":["*"]})",
        R"({"shape":"s-1vcpu-256mb","egress":["10.0.0.0/8:443"]})"})
    expect_refusal(call("POST", "/v1/sandboxes", body), 503, "nftables");
  EXPECT_EQ(sandbox_total(), before);
  EXPECT_EQ(workspace_count(), 0u);
  // No network at all needs no rules: still served.
  auto g = create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  EXPECT_EQ(exec(g.id, "/bin/echo", {"offline"}).stdout_text, "offline\n");
  expect_refusal(call("PUT", "/v1/sandboxes/" + g.id + "/egress", R"({"egress":["*"]})"), 503,
                 "nftables");
}

} // namespace
} // namespace guestflow::testing
