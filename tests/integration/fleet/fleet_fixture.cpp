#include "tests/integration/fleet/fleet_fixture.hpp"

#include "messages/jsend.hpp"
#include "tests/integration/control_plane/http_client.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/slurp.hpp"

#include <csignal>
#include <fcntl.h>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace guestflow::testing {

using namespace std::chrono_literals;

namespace {

using test_support::slurp;

} // namespace

cli_run::cli_run(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env,
                 const std::filesystem::path& scratch) {
  static int counter = 0;
  auto tag = std::to_string(::getpid()) + "-" + std::to_string(counter++);
  out_ = scratch / ("cli-" + tag + ".out");
  err_ = scratch / ("cli-" + tag + ".err");
  std::vector<std::string> all{GUESTFLOW_BIN};
  all.insert(all.end(), args.begin(), args.end());
  pid_ = ::fork();
  if (pid_ == 0) {
    for (auto& [k, v] : env)
      ::setenv(k.c_str(), v.c_str(), 1);
    int in = ::open("/dev/null", O_RDONLY);
    int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(GUESTFLOW_BIN, argv.data());
    ::_exit(127);
  }
}

cli_run::~cli_run() {
  if (pid_ > 0 && !done_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

cli_run::outcome cli_run::finish(int st) {
  done_ = true;
  outcome o;
  o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  o.out = slurp(out_);
  o.err = slurp(err_);
  ended_ = o;
  return o;
}

cli_run::outcome cli_run::wait(std::chrono::seconds timeout) {
  if (ended_) return *ended_;
  int st = 0;
  if (!test_support::eventually([&] { return ::waitpid(pid_, &st, WNOHANG) == pid_; }, timeout,
                                20ms)) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &st, 0);
  }
  return finish(st);
}

std::optional<cli_run::outcome> cli_run::try_wait() {
  if (ended_) return ended_;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) != pid_) return std::nullopt;
  return finish(st);
}

std::string cli_run::out_so_far() const {
  return slurp(out_);
}

std::string cli_run::err_so_far() const {
  return slurp(err_);
}

void cli_run::signal(int sig) const {
  if (pid_ > 0 && !done_) ::kill(pid_, sig);
}

void fleet_fixture::TearDown() {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!nodes[i]) continue;
    http_client http{nodes[i]->port()};
    for (auto& g : live(i))
      http.call("DELETE", "/v1/sandboxes/" + g.id);
  }
}

size_t fleet_fixture::start_node(const std::string& name,
                                 const std::vector<std::string>& args) {
  std::vector<std::string> all{"--node", name};
  all.insert(all.end(), args.begin(), args.end());
  nodes.push_back(std::make_unique<control_plane_process>(dir.path() / name, all));
  names.push_back(name);
  args_.push_back(all);
  ports_.push_back(nodes.back()->port());
  return nodes.size() - 1;
}

void fleet_fixture::kill_node(size_t i) {
  ::kill(nodes[i]->pid(), SIGKILL);
  ::waitpid(nodes[i]->pid(), nullptr, 0);
  nodes[i].reset(); // its destructor finds it reaped
}

void fleet_fixture::restart_node(size_t i, const std::vector<std::string>& args) {
  std::vector<std::string> all{"control-plane", "--listen",
                               "127.0.0.1:" + std::to_string(ports_[i]), "--state-dir",
                               (dir.path() / names[i]).string()};
  auto& keep = args.empty() ? args_[i] : args;
  all.insert(all.end(), keep.begin(), keep.end());
  nodes[i] = std::make_unique<control_plane_process>(
      all, std::map<std::string, std::string>{}, dir.path() / (names[i] + "-restarted.stderr"));
}

std::string fleet_fixture::url(size_t i) const {
  return "http://127.0.0.1:" + std::to_string(ports_[i]);
}

std::string fleet_fixture::urls() const {
  std::string out;
  for (size_t i = 0; i < ports_.size(); ++i)
    out += (i ? "," : "") + url(i);
  return out;
}

std::map<std::string, std::string>
fleet_fixture::env(const std::string& runtime, std::map<std::string, std::string> extra) const {
  if (!extra.count("GUESTFLOW_FLEET")) extra.emplace("GUESTFLOW_CONTROL_PLANE_URL", urls());
  extra.emplace("GUESTFLOW_STATE_DIR", (dir.path() / runtime).string());
  return extra;
}

std::string fleet_fixture::file(const std::string& name, const std::string& content) const {
  auto path = dir.path() / name;
  std::ofstream{path, std::ios::binary} << content;
  return path.string();
}

std::vector<sandbox_view> fleet_fixture::records(size_t i) const {
  http_client http{ports_[i]};
  auto reply = http.call("GET", "/v1/sandboxes?limit=1000", {}, {}, 10s);
  EXPECT_EQ(reply.status, 200u) << reply.body;
  auto envelope = decode<jsend>(reply.body);
  if (!envelope) return {};
  auto list = decode<sandbox_list>(envelope->data.text);
  if (!list) return {};
  return list->data;
}

std::vector<sandbox_view> fleet_fixture::live(size_t i) const {
  std::vector<sandbox_view> out;
  for (auto& v : records(i))
    if (v.status != sandbox_status::destroyed && v.status != sandbox_status::failed &&
        v.status != sandbox_status::destroying)
      out.push_back(v);
  return out;
}

size_t fleet_fixture::live_total() const {
  size_t n = 0;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i]) n += live(i).size();
  return n;
}

unsigned fleet_fixture::drain(size_t i, bool on) const {
  http_client http{ports_[i]};
  return http.call(on ? "POST" : "DELETE", "/v1/drain", {}, {}, 10s).status;
}

} // namespace guestflow::testing
