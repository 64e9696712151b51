#include "tests/integration/guest_backend/test_network.hpp"

#include "controlplane/local/guests/host_command.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace guestflow::local::test {
namespace {

constexpr const char* ip_tool = "/usr/sbin/ip";

std::string dotted(uint32_t a) {
  in_addr x{htonl(a)};
  char buf[INET_ADDRSTRLEN];
  ::inet_ntop(AF_INET, &x, buf, sizeof buf);
  return buf;
}

bool ip(const std::vector<std::string>& args, const std::string& input = {}) {
  std::vector<std::string> argv{ip_tool};
  argv.insert(argv.end(), args.begin(), args.end());
  command_options opt;
  opt.input = input;
  auto r = run_command(argv, opt);
  return r && r->exit_code == 0;
}

} // namespace

bool network_tests_possible() {
  return ::geteuid() == 0 && ::access(ip_tool, X_OK) == 0 &&
         ::access("/usr/sbin/nft", X_OK) == 0;
}

std::unique_ptr<test_netns> test_netns::make() {
  auto n = std::make_unique<test_netns>();
  const uint32_t base_net = (10U << 24) | (250U << 16); // 10.250.0.0/16: 8192 /29s
  const uint32_t start = uint32_t(::getpid()) % 8192;
  for (uint32_t attempt = 0; attempt < 64; ++attempt) {
    const uint32_t idx = (start + attempt) % 8192;
    const uint32_t base = base_net + (idx << 3);
    auto name = "gft" + std::to_string(idx);
    if (!ip({"netns", "add", name})) continue; // taken by a parallel test: try the next one
    // The host link name is the claim on the subnet.
    if (!ip({"link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", name})) {
      ip({"netns", "del", name});
      continue;
    }
    n->name = name;
    n->host_if = name;
    n->host_ip = dotted(base + 1);
    n->addr_a = dotted(base + 2);
    n->addr_b = dotted(base + 3);
    bool ok =
        ip({"addr", "add", n->host_ip + "/29", "dev", name}) &&
        ip({"link", "set", name, "up"}) &&
        ip({"-n", name, "-b", "-"},
           "link set lo up\naddr add " + n->addr_a + "/29 dev eth0\naddr add " + n->addr_b +
               "/29 dev eth0\nlink set eth0 up\nroute add default via " + n->host_ip + "\n");
    if (!ok) return nullptr; // the destructor removes what exists
    return n;
  }
  return nullptr;
}

test_netns::~test_netns() {
  if (name.empty()) return;
  ip({"link", "del", host_if});
  ip({"netns", "del", name});
}

std::unique_ptr<tcp_server> test_netns::serve(const std::string& address,
                                              std::string greeting) {
  // A socket belongs to the netns of the thread that creates it.
  std::unique_ptr<tcp_server> server;
  std::thread t([&] {
    int ns = ::open(("/run/netns/" + name).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) return;
    ::close(ns);
    server = tcp_server::on(address, std::move(greeting));
  });
  t.join();
  return server;
}

} // namespace guestflow::local::test
