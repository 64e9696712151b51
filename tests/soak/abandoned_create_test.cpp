// A create whose caller is gone before its answer is written: the control plane deletes the
// guest again, since only the answer would have told anyone its id. The soak's finding: a
// runtime SIGKILLed while its create was held (a delay, a busy worker) restarts, sweeps its
// predecessor's guests, and the create then completes behind the sweep's back — a guest
// nobody would ever delete. Real guests on a real control plane (`--faults` holds the
// create); the caller that stays, and one whose answer the `lost` fault cuts, keep theirs.
#include "tests/integration/control_plane/fixture.hpp"
#include "tests/support/raw_connection.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <netinet/in.h>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

namespace guestflow::testing {
namespace {

using namespace std::chrono_literals;

using test_support::raw_connection;

std::string create_request(const std::string& name) {
  std::string body = R"({"shape":"s-1vcpu-64mb","name":")" + name + R"("})";
  return "POST /v1/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

class abandoned_create : public control_plane_test {
protected:
  void SetUp() override { state_dir_ = dir_.path() / "state"; }

  /// Every record named `name` (any status).
  std::vector<sandbox_view> named(const std::string& name) {
    std::vector<sandbox_view> out;
    for (auto& v : data<sandbox_list>(call("GET", "/v1/sandboxes?limit=1000")).data)
      if (v.name == name) out.push_back(v);
    return out;
  }

  /// The one record named `name` once it has left `creating`, within the deadline.
  std::optional<sandbox_view> settled(const std::string& name) {
    std::optional<sandbox_view> last;
    eventually(
        [&] {
          auto rows = named(name);
          if (rows.size() != 1 || rows[0].status == sandbox_status::creating) return false;
          last = rows[0];
          return true;
        },
        60s, 50ms);
    return last;
  }
};

TEST_F(abandoned_create, a_create_whose_caller_left_during_the_call_leaves_no_guest) {
  // Every create is held 2 s before it is carried out; the caller leaves during the hold.
  start({"--faults", "create:delay=2s-2s,seed=7"});
  {
    raw_connection c{cp_->port()};
    c.send(create_request("abandoned-1"));
    ASSERT_TRUE(eventually(
        [&] { return cp_->stderr_text().find("fault injected: create") != std::string::npos; },
        30s, 10ms))
        << "the create was never taken up";
    c.close();
  }
  // A second create, held as long and taken up after it: once it is answered, the first
  // one's hold is over and its guest (if it made one) is recorded.
  auto marker = create(R"({"shape":"s-1vcpu-64mb","name":"marker-1"})");
  EXPECT_EQ(view(marker.id).status, sandbox_status::running);
  // Made and deleted again (nobody got its id), or never made: no live guest either way.
  auto live = [&] {
    for (auto& v : named("abandoned-1"))
      if (v.status != sandbox_status::destroyed) return true;
    return false;
  };
  EXPECT_TRUE(eventually([&] { return !live(); }, 30s, 50ms))
      << "the guest of a create whose caller had gone is still "
      << to_string(named("abandoned-1").at(0).status);
  for (auto& v : named("abandoned-1")) {
    created_.push_back(v.id); // cleaned up should the assertion above have failed
    EXPECT_TRUE(eventually([&] { return guest_pids(v.id).empty(); }, 30s, 50ms))
        << "the undone guest left processes on the host";
  }
  EXPECT_TRUE(eventually([&] { return workspace_count() == 1; }, 30s, 50ms))
      << "only the marker's workspace may be left, not the undone guest's";
}

TEST_F(abandoned_create, a_caller_that_stays_through_the_hold_keeps_its_guest) {
  start({"--faults", "create:delay=1s-1s,seed=7"});
  auto g = create(R"({"shape":"s-1vcpu-64mb","name":"stayed-1"})");
  EXPECT_EQ(view(g.id).status, sandbox_status::running);
  EXPECT_EQ(named("stayed-1").size(), 1u);
}

TEST_F(abandoned_create, a_lost_answer_with_its_caller_still_there_keeps_the_guest) {
  // `lost`: made, then the answer is cut. The caller is there to read the cut answer, so the
  // guest stays for it to find by name (the runtime's reaper does).
  start({"--faults", "create:lost=1,seed=7"});
  raw_connection c{cp_->port()};
  c.send(create_request("lost-1"));
  auto got = c.read_to_close();
  EXPECT_NE(got.find("HTTP/1.1 200"), std::string::npos) << got;
  EXPECT_EQ(got.find("TIMEOUT"), std::string::npos) << "the cut answer never ended";
  auto v = settled("lost-1");
  ASSERT_TRUE(v);
  created_.push_back(v->id);
  EXPECT_EQ(v->status, sandbox_status::running) << "a lost answer is not an abandoned call";
}

} // namespace
} // namespace guestflow::testing
