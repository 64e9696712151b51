#include "tests/integration/runtime/runtime_fixture.hpp"

#include "messages/jsend.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/support/eventually.hpp"

#include <fcntl.h>
#include <fstream>
#include <poll.h>
#include <unistd.h>

namespace guestflow::testing {

using namespace std::chrono_literals;

void runtime_fixture::SetUp() {
  cp = std::make_unique<control_plane_process>(dir.path() / "cp");
}

void runtime_fixture::TearDown() {
  if (!cp) return;
  http_client http{cp->port()};
  for (auto& g : live_guests())
    http.call("DELETE", "/v1/sandboxes/" + g.id);
}

std::map<std::string, std::string>
runtime_fixture::env(std::map<std::string, std::string> extra) const {
  extra.emplace("GUESTFLOW_CONTROL_PLANE_URL",
                "http://127.0.0.1:" + std::to_string(cp->port()));
  extra.emplace("GUESTFLOW_STATE_DIR", (dir.path() / "runtime").string());
  return extra;
}

std::string runtime_fixture::file(const std::string& name, const std::string& content) const {
  auto path = dir.path() / name;
  std::ofstream{path, std::ios::binary} << content;
  return path.string();
}

control_plane_process::outcome
runtime_fixture::cli(const std::vector<std::string>& args,
                     std::map<std::string, std::string> extra) const {
  return control_plane_process::run_to_exit(args, env(std::move(extra)), 120s);
}

pid_t runtime_fixture::start_cli(const std::vector<std::string>& args,
                                 const std::map<std::string, std::string>& vars,
                                 int* stdout_fd) {
  int out[2] = {-1, -1};
  if (stdout_fd && ::pipe2(out, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    for (auto& [k, v] : vars)
      ::setenv(k.c_str(), v.c_str(), 1);
    int null = ::open("/dev/null", O_WRONLY);
    ::dup2(stdout_fd ? out[1] : null, 1);
    ::dup2(null, 2);
    std::vector<std::string> copy = args;
    std::vector<char*> argv{const_cast<char*>(GUESTFLOW_BIN)};
    for (auto& a : copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(GUESTFLOW_BIN, argv.data());
    ::_exit(127);
  }
  if (stdout_fd) {
    ::close(out[1]);
    *stdout_fd = out[0];
  }
  return pid;
}

runtime_fixture::stream_end
runtime_fixture::read_stream(int fd, const std::function<bool(std::string_view)>& on_chunk,
                             std::chrono::milliseconds deadline) {
  auto end = stream_end::deadline;
  test_support::eventually(
      [&] {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) return false; // waits for data; eventually bounds it all
        char chunk[4096];
        auto n = ::read(fd, chunk, sizeof chunk);
        if (n <= 0)
          end = stream_end::eof;
        else if (on_chunk({chunk, static_cast<size_t>(n)}))
          end = stream_end::enough;
        return end != stream_end::deadline;
      },
      deadline, 0ms);
  return end;
}

bool runtime_fixture::wait_for_live(size_t n) const {
  return test_support::eventually([&] { return live_guests().size() == n; }, 60s, 20ms);
}

std::vector<sandbox_view> runtime_fixture::live_guests() const {
  http_client http{cp->port()};
  auto reply = http.call("GET", "/v1/sandboxes?limit=1000");
  EXPECT_EQ(reply.status, 200u) << reply.body;
  auto envelope = decode<jsend>(reply.body);
  EXPECT_TRUE(envelope) << reply.body;
  auto list = decode<sandbox_list>(envelope->data.text);
  EXPECT_TRUE(list) << envelope->data.text;
  std::vector<sandbox_view> out;
  for (auto& v : list->data)
    if (v.status != sandbox_status::destroyed && v.status != sandbox_status::failed)
      out.push_back(v);
  return out;
}

} // namespace guestflow::testing
