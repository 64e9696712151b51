#include "tests/integration/bridge/bridge_fixture.hpp"

#include "tests/support/eventually.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>

namespace guestflow::testing {

using namespace std::chrono_literals;

void bridge_fixture::SetUp() {
  runtime_fixture::SetUp();
  start_serve();
}

void bridge_fixture::start_serve(std::map<std::string, std::string> extra) {
  serve.reset();
  extra.emplace("GUESTFLOW_CLIENT_TIMEOUT_SECONDS", "2");
  extra.emplace("GUESTFLOW_STREAM_HEARTBEAT_SECONDS", "1");
  serve = std::make_unique<control_plane_process>(
      std::vector<std::string>{"serve", "--listen", "127.0.0.1:0", "--token", token},
      env(std::move(extra)), dir.path() / "serve.stderr");
}

http_reply bridge_fixture::call(const std::string& method, const std::string& target,
                                const std::string& body, bool authorized) const {
  return client().call(method, target, body, authorized ? bearer() : header_map{}, 120s);
}

std::unique_ptr<http_stream> bridge_fixture::stream(const std::string& method,
                                                    const std::string& target,
                                                    const std::string& body) const {
  return std::make_unique<http_stream>(client(), method, target, body, bearer());
}

int bridge_fixture::connect_raw(int receive_buffer) const {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(fd, 0);
  if (receive_buffer > 0) // before connect, so the advertised window starts small
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(serve->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

std::string bridge_fixture::run_body(const std::string& example, const std::string& extra) {
  std::ifstream in{std::string{GUESTFLOW_SOURCE_DIR} + "/examples/flows/" + example + ".json"};
  std::stringstream flow;
  flow << in.rdbuf();
  return "{\"flow\":" + flow.str() + (extra.empty() ? "" : "," + extra) + "}";
}

std::vector<run_event> bridge_fixture::drain(http_stream& s) {
  std::vector<run_event> out;
  while (auto line = s.next_line(120s)) {
    if (line->empty()) continue; // a keepalive
    auto e = decode<run_event>(*line);
    EXPECT_TRUE(e) << *line;
    if (!e) break;
    out.push_back(std::move(*e));
  }
  return out;
}

double bridge_fixture::metric(const std::string& name) const {
  auto r = call("GET", "/metrics");
  EXPECT_EQ(r.status, 200u) << r.body;
  std::istringstream lines{r.body};
  for (std::string line; std::getline(lines, line);)
    if (line.compare(0, name.size() + 1, name + " ") == 0)
      return std::stod(line.substr(name.size() + 1));
  ADD_FAILURE() << "no metric " << name << " in\n" << r.body;
  return -1;
}

bool bridge_fixture::wait_until_no_guest_is_owed() const {
  return test_support::eventually(
      [&] {
        return metric("guestflow_guests_tracked") == 0 &&
               metric("guestflow_guests_pending_delete") == 0;
      },
      60s, 20ms);
}

} // namespace guestflow::testing
