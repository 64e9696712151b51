#include "tests/integration/bad_input/door_harness.hpp"

#include "messages/jsend.hpp"
#include "tests/integration/control_plane/http_client.hpp"

#include <fcntl.h>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::testing {

void door_fixture::SetUp() {
  // bridge_fixture's own control plane first (its SetUp), then one with small caps.
  bridge_fixture::SetUp();
  serve.reset();
  cp.reset();
  auto cap = std::to_string(test_output_cap);
  cp = std::make_unique<control_plane_process>(
      dir.path() / "cp-small-caps",
      std::vector<std::string>{"--max-stdout-bytes", cap, "--max-stderr-bytes", cap});
  start_serve();
}

std::string door_fixture::plugin(const std::string& case_json,
                                 const std::map<std::string, std::string>& extra) const {
  std::string src = GUESTFLOW_SOURCE_DIR;
  std::map<std::string, std::string> vars{
      {"PYTHONPATH", src + "/bridge/python:" + src + "/bridge/python/tests/stand_in"},
      {"GUESTFLOW_URL", "http://127.0.0.1:" + std::to_string(serve->port())},
      {"GUESTFLOW_TOKEN", token}};
  for (auto& [k, v] : extra)
    vars[k] = v;
  auto out = run_process({"python3", GUESTFLOW_PLUGIN_DOOR, case_json}, vars);
  EXPECT_EQ(out.status, 0) << out.stdout_text;
  return out.stdout_text;
}

size_t door_fixture::guest_records() const {
  http_client http{cp->port()};
  auto reply = http.call("GET", "/v1/sandboxes?limit=1000");
  auto envelope = decode<jsend>(reply.body);
  if (!envelope) return SIZE_MAX;
  auto list = decode<sandbox_list>(envelope->data.text);
  return list ? list->data.size() : SIZE_MAX;
}

std::set<std::string> door_fixture::control_plane_files() const {
  std::set<std::string> out;
  std::error_code err;
  auto root = dir.path() / "cp-small-caps";
  for (auto it = std::filesystem::recursive_directory_iterator{root, err};
       it != std::filesystem::recursive_directory_iterator{}; it.increment(err)) {
    if (err) break;
    auto name = it->path().filename().string();
    if (name.find(".db") != std::string::npos || name.find(".sqlite") != std::string::npos ||
        name.find(".sock") != std::string::npos)
      continue;
    out.insert(std::filesystem::relative(it->path(), root, err).string());
  }
  return out;
}

process_outcome run_process(const std::vector<std::string>& argv,
                            const std::map<std::string, std::string>& env) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    ::dup2(out[1], 1);
    std::vector<std::string> copy = argv;
    std::vector<char*> args;
    for (auto& a : copy)
      args.push_back(a.data());
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  process_outcome o;
  char buf[4096];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    o.stdout_text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  o.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return o;
}

} // namespace guestflow::testing
