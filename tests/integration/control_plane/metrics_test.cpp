// GET /metrics on a real control plane: its warm pools and its node in Prometheus's text
// format (what docs/grafana's pool and fleet-node panels query), the same numbers as
// GET /v1/pool and GET /v1/capacity, behind the same API key.
#include "tests/integration/control_plane/fixture.hpp"

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace guestflow::testing {
namespace {

using control_plane_metrics = control_plane_test;

const std::string pool_guest = R"(shape="s-1vcpu-256mb",image="debian:12")";

/// `name{labels}` → value of every sample in a GET /metrics body; a line that is neither a
/// comment nor a sample, or a sample of a family with no `# TYPE … gauge`, fails the test.
std::map<std::string, uint64_t> samples(const http_reply& r) {
  EXPECT_EQ(r.status, 200u) << r.body;
  static const std::regex sample{R"(^([a-z_]+?)(_sum|_count)?\{([^}]*)\} (\d+)(\.\d+)?$)"};
  static const std::regex type{R"(^# TYPE ([a-z_]+) (gauge|counter|summary)$)"};
  std::map<std::string, uint64_t> out;
  std::set<std::string> typed;
  std::istringstream in{r.body};
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, type)) {
      typed.insert(m[1]);
    } else if (std::regex_match(line, m, sample)) {
      EXPECT_TRUE(typed.count(m[1]) || typed.count(m[1].str() + m[2].str()))
          << "a sample before its # TYPE: " << line;
      out[m[1].str() + m[2].str() + "{" + m[3].str() + "}"] = std::stoull(m[4]);
    } else {
      EXPECT_EQ(line.rfind("# HELP ", 0), 0u) << "not the text format: " << line;
    }
  }
  return out;
}

/// A number field of `GET /v1/capacity`'s data, as its JSON text.
std::string field(const http_reply& r, const std::string& name) {
  auto key = "\"" + name + "\":";
  auto at = r.body.find(key);
  if (at == std::string::npos) return "no " + name + " in " + r.body;
  at += key.size();
  return r.body.substr(at, r.body.find_first_of(",}", at) - at);
}

/// The value of `key` (`name{labels}`), or -1 when the scrape has no such sample.
int64_t value(const std::map<std::string, uint64_t>& s, const std::string& key) {
  auto i = s.find(key);
  return i == s.end() ? -1 : static_cast<int64_t>(i->second);
}

TEST_F(control_plane_metrics, a_pool_guest_shows_up_as_ready_and_the_node_as_ready) {
  stop();
  start({"--warm-pool", "s-1vcpu-256mb=1", "--node", "node-m", "--memory-budget-mb", "2048",
         "--max-guests", "7"});
  const std::string pool = R"({node="node-m",)" + pool_guest;
  ASSERT_TRUE(eventually(
      [&] {
        auto s = samples(call("GET", "/metrics"));
        return value(s, "guestflow_pool_guests" + pool + R"(,state="ready"})") == 1 &&
               value(s, "guestflow_pool_guests" + pool + R"(,state="creating"})") == 0;
      },
      std::chrono::seconds{60}))
      << call("GET", "/metrics").body;
  auto s = samples(call("GET", "/metrics"));
  EXPECT_EQ(value(s, "guestflow_pool_target" + pool + "}"), 1);
  EXPECT_EQ(value(s, R"(guestflow_node_ready{node="node-m"})"), 1);
  EXPECT_EQ(value(s, R"(guestflow_node_draining{node="node-m"})"), 0);
  EXPECT_EQ(value(s, R"(guestflow_node_max_guests{node="node-m"})"), 7);
  EXPECT_EQ(value(s, R"(guestflow_node_memory_budget_mib{node="node-m"})"), 2048);
  // The same numbers as the JSON answers; the pool's guest is committed.
  auto c = call("GET", "/v1/capacity");
  auto guests = value(s, R"(guestflow_node_guests{node="node-m"})");
  auto committed = value(s, R"(guestflow_node_memory_committed_mib{node="node-m"})");
  EXPECT_EQ(std::to_string(guests), field(c, "guests"));
  EXPECT_EQ(std::to_string(committed), field(c, "memory_committed_mib"));
  EXPECT_GE(guests, 1) << "the pool's guest";
  EXPECT_GE(committed, 256) << "the pool's guest";
  auto p = call("GET", "/v1/pool").body;
  EXPECT_NE(p.find(R"("target":1,"ready":1,"creating":0)"), std::string::npos) << p;

  // Taken by a create, the pool refills: one guest more on the node, ready again.
  create(R"({"shape":"s-1vcpu-256mb","egress":["240.0.0.0/4"]})");
  ASSERT_TRUE(eventually(
      [&] {
        auto now = samples(call("GET", "/metrics"));
        return value(now, R"(guestflow_node_guests{node="node-m"})") == guests + 1 &&
               value(now, R"(guestflow_node_memory_committed_mib{node="node-m"})") ==
                   committed + 256 &&
               value(now, "guestflow_pool_guests" + pool + R"(,state="ready"})") == 1;
      },
      std::chrono::seconds{60}))
      << call("GET", "/metrics").body;
}

TEST_F(control_plane_metrics, a_drained_node_reads_not_ready_until_the_drain_ends) {
  stop();
  start({"--node", "node-d"});
  auto s = samples(call("GET", "/metrics"));
  EXPECT_EQ(value(s, R"(guestflow_node_ready{node="node-d"})"), 1);
  EXPECT_EQ(value(s, R"(guestflow_node_guests{node="node-d"})"), 0);
  for (const auto& [key, v] : s)
    EXPECT_EQ(key.rfind("guestflow_pool_", 0), std::string::npos) << "no pool, yet " << key;

  ASSERT_EQ(call("POST", "/v1/drain").status, 200u);
  s = samples(call("GET", "/metrics"));
  EXPECT_EQ(value(s, R"(guestflow_node_ready{node="node-d"})"), 0) << "draining";
  EXPECT_EQ(value(s, R"(guestflow_node_draining{node="node-d"})"), 1);

  ASSERT_EQ(call("DELETE", "/v1/drain").status, 200u);
  s = samples(call("GET", "/metrics"));
  EXPECT_EQ(value(s, R"(guestflow_node_ready{node="node-d"})"), 1);
  EXPECT_EQ(value(s, R"(guestflow_node_draining{node="node-d"})"), 0);
}

TEST_F(control_plane_metrics, it_needs_the_api_key_like_every_route) {
  stop();
  api_key_ = "metrics-key";
  start({"--api-key", api_key_});
  auto anonymous = http_client{cp_->port()}.call("GET", "/metrics");
  EXPECT_EQ(anonymous.status, 401u) << anonymous.body;
  EXPECT_EQ(anonymous.body.find("guestflow_"), std::string::npos) << anonymous.body;
  auto scraped = call("GET", "/metrics");
  EXPECT_EQ(scraped.status, 200u);
  // Prometheus's text format by its own type: Prometheus 3 refuses a scrape it cannot type.
  EXPECT_EQ(scraped.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(call("GET", "/v1/capacity").headers["content-type"], "application/json");
  EXPECT_EQ(call("POST", "/metrics").status, 405u) << "read-only";
}

} // namespace
} // namespace guestflow::testing
