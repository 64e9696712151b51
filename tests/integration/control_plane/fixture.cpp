#include "tests/integration/control_plane/fixture.hpp"

#include "tests/support/proc.hpp"

#include <optional>

namespace guestflow::testing {

void control_plane_test::SetUp() {
  state_dir_ = dir_.path() / "state";
  start();
}

void control_plane_test::TearDown() {
  // Only a running server deletes its guests whole (processes, cgroup, netns, workspace): one
  // the test stopped or killed is started again on its state dir, whose reconcile adopts
  // the guests it left (a raw POST's too, which created_ never saw).
  bool answers = false;
  if (cp_ && cp_->pid() > 0) {
    try {
      answers = call("GET", "/v1/sandboxes?limit=1").status == 200;
    } catch (const std::exception&) {
    }
  }
  if (!answers) {
    try {
      start();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cannot start the control plane again to delete its guests: "
                    << e.what();
      return;
    }
  }
  auto deleted = delete_every_guest();
  deleted.insert(created_.begin(), created_.end());
  stop();
  for (const auto& id : deleted)
    if (!eventually([&] { return guest_pids(id).empty(); }, std::chrono::seconds{10}))
      ADD_FAILURE() << "guest " << id << " still has processes after the server stopped";
}

std::set<std::string> control_plane_test::delete_every_guest() {
  std::set<std::string> seen;
  std::map<std::string, std::string> left; // id -> the last answer about it
  auto none_left = [&] {
    http_reply list;
    try {
      list = call("GET", "/v1/sandboxes?limit=1000");
    } catch (const std::exception& e) {
      left[""] = std::string{"the list failed: "} + e.what();
      return false;
    }
    std::optional<sandbox_list> views;
    if (auto env = decode<jsend>(list.body); env && list.status == 200)
      if (auto l = decode<sandbox_list>(env->data.text)) views = std::move(*l);
    if (!views) {
      left[""] = "the list failed: " + list.body;
      return false;
    }
    left.clear();
    for (const auto& v : views->data) {
      if (v.status == sandbox_status::destroyed || v.status == sandbox_status::failed) continue;
      seen.insert(v.id);
      left[v.id] = std::string{"listed "} + std::string{to_string(v.status)};
      if (v.status == sandbox_status::destroying) continue;
      try { // again while it is refused (e.g. still creating)
        auto r = call("DELETE", "/v1/sandboxes/" + v.id);
        left[v.id] += "; DELETE answered " + std::to_string(r.status) + " " + r.body;
      } catch (const std::exception& e) {
        left[v.id] += std::string{"; DELETE failed: "} + e.what();
      }
    }
    return left.empty();
  };
  if (!eventually(none_left, std::chrono::seconds{60}, std::chrono::milliseconds{50}))
    for (const auto& [id, why] : left)
      ADD_FAILURE() << "teardown could not delete guest " << id << ": " << why;
  return seen;
}

void control_plane_test::start(const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env) {
  cp_.reset();
  cp_ = std::make_unique<control_plane_process>(state_dir_, args, env);
}

int control_plane_test::stop() {
  auto st = cp_->stop();
  return st;
}

http_reply control_plane_test::call(const std::string& method, const std::string& target,
                                    const std::string& body, const header_map& headers) const {
  return client().call(method, target, body, headers);
}

jsend control_plane_test::envelope(const http_reply& r) {
  auto env = decode<jsend>(r.body);
  if (!env) {
    ADD_FAILURE() << "not a JSend body (" << env.error().message << "): " << r.body;
    return {};
  }
  return *env;
}

void control_plane_test::expect_refusal(const http_reply& r, unsigned status,
                                        const std::string& needle) {
  EXPECT_EQ(r.status, status) << r.body;
  auto env = envelope(r);
  EXPECT_EQ(env.status, status < 500 ? jsend::kind::fail : jsend::kind::error) << r.body;
  EXPECT_NE(r.body.find(needle), std::string::npos)
      << "expected '" << needle << "' in " << r.body;
}

sandbox_created control_plane_test::create(const std::string& body) {
  auto asked = body;
  if (!isolation_.empty() && asked.find("\"isolation\"") == std::string::npos &&
      asked.rfind("{", 0) == 0)
    asked.insert(1, "\"isolation\":\"" + isolation_ + "\",");
  auto r = call("POST", "/v1/sandboxes", asked);
  auto c = data<sandbox_created>(r);
  if (!c.id.empty()) created_.push_back(c.id);
  if (!c.id.empty() && !isolation_.empty()) {
    EXPECT_EQ(view(c.id).isolation, isolation_);
  }
  return c;
}

std::string control_plane_test::exec_body(const std::string& cmd,
                                          const std::vector<std::string>& args) const {
  exec_request req;
  req.cmd = cmd;
  req.args = args;
  return encode(req);
}

http_reply control_plane_test::exec_reply(const std::string& id, const std::string& cmd,
                                          const std::vector<std::string>& args) {
  return call("POST", "/v1/sandboxes/" + id + "/exec", exec_body(cmd, args));
}

exec_result control_plane_test::exec(const std::string& id, const std::string& cmd,
                                     const std::vector<std::string>& args) {
  return data<exec_result>(exec_reply(id, cmd, args));
}

sandbox_view control_plane_test::view(const std::string& id) {
  return data<sandbox_view>(call("GET", "/v1/sandboxes/" + id));
}

http_reply control_plane_test::put_file(const std::string& id, const std::string& path,
                                        const std::string& body) {
  return call("PUT", "/v1/sandboxes/" + id + "/files?path=" + url_encode(path), body);
}

http_reply control_plane_test::get_file(const std::string& id, const std::string& path) {
  return call("GET", "/v1/sandboxes/" + id + "/files?path=" + url_encode(path));
}

std::vector<int> guest_pids(const std::string& id) {
  return test_support::pids_where(
      "cgroup", [&id](const std::string& text) { return text.find(id) != std::string::npos; });
}

size_t control_plane_test::workspace_count() const {
  auto dir = state_dir_ / "guests";
  if (!std::filesystem::exists(dir)) return 0;
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir))
    ++n;
  return n;
}

uint64_t control_plane_test::sandbox_total() {
  return data<sandbox_list>(call("GET", "/v1/sandboxes")).total;
}

bool control_plane_test::pool_full(int n, std::chrono::seconds within) {
  const auto full = R"("target":)" + std::to_string(n) + R"(,"ready":)" + std::to_string(n) +
                    R"(,"creating":0)";
  return eventually(
      [&] { return call("GET", "/v1/pool").body.find(full) != std::string::npos; }, within);
}

} // namespace guestflow::testing
