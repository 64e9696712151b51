// The fault plan (`guestflow control-plane --faults SPEC`): what is read, every refusal, a
// decision source that depends on (seed, operation, call number) only; and the wrapper
// route_table puts around every handler, on the simulated domain.
#include "controlplane/local/http/fault_injection.hpp"
#include "controlplane/local/http/routes.hpp"
#include "controlplane/local/service/simulated_control_plane.hpp"

#include <gtest/gtest.h>
#include <mutex>
#include <poll.h>
#include <unistd.h>
#include <variant>

namespace guestflow::local {
namespace {

fault_plan parsed(std::string_view text) {
  auto p = fault_plan::parse(text);
  EXPECT_TRUE(p) << text << ": " << p.error().message;
  return p ? *p : fault_plan{};
}

void expect_refused(std::string_view text, const std::string& needle) {
  auto p = fault_plan::parse(text, "GUESTFLOW_FAULTS");
  ASSERT_FALSE(p) << "'" << text << "' was accepted as " << p->to_string();
  EXPECT_EQ(p.error().code, ec::bad_request);
  EXPECT_EQ(p.error().message.rfind("GUESTFLOW_FAULTS: ", 0), 0u) << p.error().message;
  EXPECT_NE(p.error().message.find(needle), std::string::npos)
      << "expected '" << needle << "' in: " << p.error().message;
}

TEST(fault_plan, reads_the_documented_example) {
  auto p =
      parsed(" create:5xx=0.1, exec:drop=0.05,delete:timeout=0.1 ,any:delay=0-300ms,seed=42 ");
  EXPECT_EQ(p.seed(), 42u);
  EXPECT_DOUBLE_EQ(p.share(fault_op::create, fault_kind::error_5xx), 0.1);
  EXPECT_DOUBLE_EQ(p.share(fault_op::exec, fault_kind::drop), 0.05);
  EXPECT_DOUBLE_EQ(p.share(fault_op::remove, fault_kind::timeout), 0.1);
  EXPECT_DOUBLE_EQ(p.share(fault_op::get, fault_kind::error_5xx), 0.0);
  EXPECT_EQ(p.hold(), std::chrono::seconds{150}) << "longer than the runtime's 120 s";
  EXPECT_FALSE(p.empty());
  EXPECT_EQ(parsed(p.to_string()).to_string(), p.to_string())
      << "the canonical form reads back";
}

TEST(fault_plan, an_operation_replaces_any_for_its_own_kinds) {
  auto p = parsed("any:5xx=0.2,any:429=0.1,create:5xx=0,hold=2s");
  EXPECT_DOUBLE_EQ(p.share(fault_op::create, fault_kind::error_5xx), 0.0);
  EXPECT_DOUBLE_EQ(p.share(fault_op::create, fault_kind::busy_429), 0.1);
  EXPECT_DOUBLE_EQ(p.share(fault_op::other, fault_kind::error_5xx), 0.2) << "any covers all";
  EXPECT_EQ(p.hold(), std::chrono::milliseconds{2000});
}

TEST(fault_plan, empty_off_and_none_inject_nothing) {
  for (auto text : {"", " ", "off", "NONE", "create:5xx=0", "seed=3"})
    EXPECT_TRUE(parsed(text).empty()) << "'" << text << "'";
  EXPECT_EQ(parsed("off").to_string(), "off");
}

TEST(fault_plan, refuses_what_it_cannot_read) {
  expect_refused("create:5xx", "expected OP:KIND=SHARE");
  expect_refused("boot:5xx=0.1", "unknown operation 'boot'");
  expect_refused("other:5xx=0.1", "unknown operation 'other'");
  expect_refused("create:503=0.1", "unknown fault '503'");
  expect_refused("create:5xx=1.5", "number in [0, 1]");
  expect_refused("create:5xx=-0.1", "number in [0, 1]");
  expect_refused("create:5xx=ten", "number in [0, 1]");
  expect_refused("create:5xx=0.1,create:5xx=0.2", "given twice");
  expect_refused("create:5xx=0.6,create:drop=0.5", "shares of create add up to 1.1");
  expect_refused("any:5xx=0.6,get:429=0.5", "shares of get add up to 1.1");
  expect_refused("any:delay=300-0ms", "LO is greater than HI");
  expect_refused("any:delay=0-90s", "at most 60s");
  expect_refused("any:delay=fast", "expected LO-HI or N");
  expect_refused("any:delay=0-3ms@2", "after '@'");
  expect_refused("any:delay=1ms,any:delay=2ms", "delay given twice");
  expect_refused("seed=-1", "seed: expected an unsigned integer");
  expect_refused("seed=1,seed=2", "seed given twice");
  expect_refused("hold=0", "hold: expected a duration");
  expect_refused("hold=2h", "hold: expected a duration");
  expect_refused("speed=3", "unknown setting 'speed'");
}

TEST(fault_plan, decisions_depend_on_seed_operation_and_call_number_only) {
  auto a = parsed("any:5xx=0.1,any:429=0.1,any:drop=0.1,any:timeout=0.1,any:lost=0.1,seed=7");
  auto b = parsed("seed=7,any:lost=0.1,any:timeout=0.1,any:drop=0.1,any:429=0.1,any:5xx=0.1");
  auto c = parsed("any:5xx=0.1,any:429=0.1,any:drop=0.1,any:timeout=0.1,any:lost=0.1,seed=8");
  size_t differ = 0;
  for (uint64_t n = 0; n < 1000; ++n) {
    EXPECT_EQ(a.decide(fault_op::create, n).kind, b.decide(fault_op::create, n).kind);
    differ += a.decide(fault_op::create, n).kind != c.decide(fault_op::create, n).kind;
  }
  EXPECT_GT(differ, 100u) << "another seed, other faults";
  size_t same_across_ops = 0;
  for (uint64_t n = 0; n < 1000; ++n)
    same_across_ops += a.decide(fault_op::create, n).kind == a.decide(fault_op::exec, n).kind;
  EXPECT_LT(same_across_ops, 800u) << "operations draw independently";
}

TEST(fault_plan, shares_are_kept_over_many_calls) {
  auto p = parsed("exec:5xx=0.1,exec:429=0.05,exec:drop=0.2,exec:lost=0.15,seed=99");
  std::array<size_t, fault_kind_count> seen{};
  size_t none = 0;
  constexpr size_t calls = 100'000;
  for (uint64_t n = 0; n < calls; ++n) {
    auto d = p.decide(fault_op::exec, n);
    if (d.kind)
      ++seen[static_cast<size_t>(*d.kind)];
    else
      ++none;
    EXPECT_EQ(d.delay.count(), 0);
  }
  auto near = [&](size_t got, double share) {
    EXPECT_NEAR(static_cast<double>(got) / calls, share, 0.01);
  };
  near(seen[0], 0.1);
  near(seen[1], 0.05);
  near(seen[2], 0.2);
  near(seen[3], 0.0);
  near(seen[4], 0.15);
  near(none, 0.5);
}

TEST(fault_plan, delays_stay_in_their_range_for_their_share) {
  auto p = parsed("any:delay=20-300ms@0.25,get:delay=1s,seed=5");
  size_t delayed = 0;
  for (uint64_t n = 0; n < 10'000; ++n) {
    auto d = p.decide(fault_op::create, n);
    EXPECT_FALSE(d.kind);
    if (d.delay.count() == 0) continue;
    ++delayed;
    EXPECT_GE(d.delay.count(), 20);
    EXPECT_LE(d.delay.count(), 300);
    EXPECT_EQ(p.decide(fault_op::get, n).delay, std::chrono::seconds{1}) << "own, every call";
  }
  EXPECT_NEAR(delayed / 10'000.0, 0.25, 0.02);
  EXPECT_EQ(parsed("any:delay=1-2s").decide(fault_op::list, 0).delay.count() / 1000, 1)
      << "LO takes HI's unit";
}

// ---- the wrapper, on the simulated domain ---------------------------------------------

class with_faults_test : public ::testing::Test {
protected:
  void TearDown() override { install_faults(nullptr); }

  void use(std::string_view spec) {
    install_faults(std::make_shared<fault_injector>(parsed(spec), [this](const fault_event& e) {
      std::lock_guard<std::mutex> guard{mu_};
      events_.push_back(describe(e));
    }));
  }

  action call(const std::string& method, const std::string& target, std::string body = {}) {
    auto t = parse_target(target);
    EXPECT_TRUE(t);
    target_ = *t;
    auto r = match_route(method, target_.path);
    EXPECT_EQ(r.kind, route::outcome::found) << method << " " << target;
    body_ = std::move(body);
    return r.target->handle({r.id, target_.query, body_, svc_, opts_});
  }

  size_t guests() { return svc_.list({})->total; }

  simulated_control_plane svc_{std::chrono::milliseconds{0}, ""};
  http_options opts_;
  request_target target_;
  std::string body_;
  std::mutex mu_;
  std::vector<std::string> events_;
};

const std::string create_body = R"({"shape":"s-1vcpu-256mb","name":"faulty"})";

TEST_F(with_faults_test, without_an_injector_a_handler_runs_as_given) {
  auto a = call("POST", "/v1/sandboxes", create_body);
  ASSERT_TRUE(std::holds_alternative<domain_call>(a));
  EXPECT_EQ(std::get<domain_call>(a).run().status, 200u);
  EXPECT_EQ(guests(), 1u);
  EXPECT_TRUE(events_.empty());
}

TEST_F(with_faults_test, refusals_answer_at_once_and_carry_nothing_out) {
  use("create:5xx=1");
  auto a = call("POST", "/v1/sandboxes", create_body);
  ASSERT_TRUE(std::holds_alternative<reply>(a));
  EXPECT_EQ(std::get<reply>(a).status, 500u);
  use("create:429=1");
  a = call("POST", "/v1/sandboxes", create_body);
  ASSERT_TRUE(std::holds_alternative<reply>(a));
  EXPECT_EQ(std::get<reply>(a).status, 429u);
  EXPECT_NE(std::get<reply>(a).body.find(R"("code":"capacity")"), std::string::npos);
  EXPECT_EQ(guests(), 0u);
  EXPECT_EQ(events_, (std::vector<std::string>{"fault injected: create 5xx (call 0)",
                                               "fault injected: create 429 (call 0)"}));
  a = call("POST", "/v1/sandboxes/x/pause");
  EXPECT_TRUE(std::holds_alternative<domain_call>(a)) << "other operations are left alone";
}

/// The bytes an answer file holds, and the length its header promises.
std::pair<std::string, uint64_t> read_answer(file_download& d) {
  auto f = d.open();
  EXPECT_TRUE(f) << f.error().message;
  if (!f) return {};
  std::string got(4096, '\0');
  auto n = ::read(f->file.fd.get(), got.data(), got.size());
  got.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return {got, f->size};
}

TEST_F(with_faults_test, a_drop_promises_more_than_it_sends_and_carries_nothing_out) {
  use("create:drop=1");
  auto a = call("POST", "/v1/sandboxes", create_body);
  ASSERT_TRUE(std::holds_alternative<file_download>(a));
  auto [sent, promised] = read_answer(std::get<file_download>(a));
  EXPECT_LT(sent.size(), promised);
  EXPECT_EQ(guests(), 0u);
}

TEST_F(with_faults_test, a_lost_create_exists_but_its_answer_is_cut) {
  use("create:lost=1");
  auto a = call("POST", "/v1/sandboxes", create_body);
  ASSERT_TRUE(std::holds_alternative<file_download>(a));
  auto [sent, promised] = read_answer(std::get<file_download>(a));
  EXPECT_EQ(guests(), 1u) << "the guest was created";
  EXPECT_LT(sent.size(), promised);
  EXPECT_EQ(sent.rfind(R"({"status":"success")", 0), 0u) << "the first half of the answer";
}

TEST_F(with_faults_test, a_held_call_ends_when_its_client_goes) {
  use("delete:timeout=1,hold=3600s");
  auto a = call("DELETE", "/v1/sandboxes/sb-x");
  ASSERT_TRUE(std::holds_alternative<exec_call>(a));
  auto& e = std::get<exec_call>(a);
  EXPECT_FALSE(e.streaming);
  auto run = e.start();
  ASSERT_TRUE(run);
  pollfd p{(*run)->exit_fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "held: no exit yet";
  (*run)->kill(); // what the transport does when the client closes
  EXPECT_EQ(::poll(&p, 1, 10'000), 1) << "the kill ends the hold";
  EXPECT_TRUE((*run)->finish().error);
}

TEST_F(with_faults_test, a_put_cannot_be_cut_so_a_drop_leaves_it_alone) {
  use("files:drop=1");
  auto a = call("PUT", "/v1/sandboxes/x/files?path=/workspace/a");
  EXPECT_TRUE(std::holds_alternative<file_upload>(a));
  EXPECT_TRUE(events_.empty()) << "only faults applied are reported";
}

// A small upload read whole is written through file_upload::open_with_room in one call; a
// faulted PUT offers none, so that the transport goes through the faulted `open`.
TEST_F(with_faults_test, a_faulted_put_offers_no_one_call_open) {
  auto plain = call("PUT", "/v1/sandboxes/x/files?path=/workspace/a");
  ASSERT_TRUE(std::holds_alternative<file_upload>(plain));
  EXPECT_TRUE(std::get<file_upload>(plain).open_with_room) << "unfaulted: offered";
  for (const char* plan : {"files:delay=1ms,seed=3", "files:timeout=1,hold=1ms"}) {
    use(plan);
    auto a = call("PUT", "/v1/sandboxes/x/files?path=/workspace/a");
    ASSERT_TRUE(std::holds_alternative<file_upload>(a)) << plan;
    auto& up = std::get<file_upload>(a);
    EXPECT_FALSE(up.open_with_room) << plan;
    EXPECT_FALSE(up.open()) << plan << ": the faulted open still runs (no guest x, or held)";
  }
}

TEST_F(with_faults_test, a_delay_moves_the_call_to_a_worker_and_is_reported) {
  use("any:delay=1ms,seed=3");
  auto a = call("GET", "/v1/sandboxes/nope");
  ASSERT_TRUE(std::holds_alternative<domain_call>(a));
  EXPECT_EQ(std::get<domain_call>(a).run().status, 404u);
  a = call("GET", "/v1/sandboxes/x/files"); // refused at once (no ?path=): still delayed
  ASSERT_TRUE(std::holds_alternative<domain_call>(a));
  EXPECT_EQ(std::get<domain_call>(a).run().status, 400u);
  EXPECT_EQ(events_,
            (std::vector<std::string>{"fault injected: get delay after 1ms (call 0)",
                                      "fault injected: files delay after 1ms (call 0)"}));
}

} // namespace
} // namespace guestflow::local
