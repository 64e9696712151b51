// CAF side of messages/: every type in the guestflow type-id block serializes and
// deserializes through CAF 0.17's binary (de)serializer, also inside a caf::message (which
// only works for registered types), and errors map to and from caf::error.

#include "messages/type_ids.hpp"
#include "tests/unit/messages/samples.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/detail/tuple_vals.hpp>
#include <caf/make_message.hpp>
#include <caf/message.hpp>
#include <caf/sec.hpp>
#include <gtest/gtest.h>
#include <memory>
#include <utility>

namespace guestflow {
namespace {

using namespace guestflow::test;

class caf_serialization : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    cfg_ = std::make_unique<caf::actor_system_config>();
    register_types(*cfg_);
    sys_ = std::make_unique<caf::actor_system>(*cfg_);
  }

  static void TearDownTestSuite() {
    sys_.reset();
    cfg_.reset();
  }

  static caf::actor_system& sys() { return *sys_; }

  template<class T>
  static void expect_round_trip(const T& x) {
    std::vector<char> buf;
    caf::binary_serializer sink{sys(), buf};
    auto in = x;
    ASSERT_FALSE(sink(in)) << "serializing " << caf::type_name<T>::value;
    T y{};
    caf::binary_deserializer source{sys(), buf};
    ASSERT_FALSE(source(y)) << "deserializing " << caf::type_name<T>::value;
    EXPECT_TRUE(y == x) << caf::type_name<T>::value;
    // Inside a type-erased message, which needs the type registered by name.
    auto msg = caf::make_message(x);
    std::vector<char> mbuf;
    caf::binary_serializer msink{sys(), mbuf};
    ASSERT_FALSE(msink(msg)) << "serializing a message of " << caf::type_name<T>::value;
    caf::message back;
    caf::binary_deserializer msource{sys(), mbuf};
    ASSERT_FALSE(msource(back)) << "deserializing a message of " << caf::type_name<T>::value;
    ASSERT_TRUE(back.match_elements<T>()) << caf::type_name<T>::value;
    EXPECT_TRUE(back.get_as<T>(0) == x) << caf::type_name<T>::value;
  }

  template<caf::type_id_t... Is>
  static void every_default(std::integer_sequence<caf::type_id_t, Is...>) {
    (expect_round_trip(typename caf::type_by_id<caf::id_block::guestflow::begin + Is>::type{}),
     ...);
  }

private:
  static inline std::unique_ptr<caf::actor_system_config> cfg_;
  static inline std::unique_ptr<caf::actor_system> sys_;
};

TEST_F(caf_serialization, every_type_in_the_block_default_constructed) {
  constexpr auto n = caf::id_block::guestflow::end - caf::id_block::guestflow::begin;
  static_assert(n >= 26, "the guestflow block lost types");
  every_default(std::make_integer_sequence<caf::type_id_t, n>{});
}

TEST_F(caf_serialization, failure) {
  expect_round_trip(failure{ec::egress_drift, "guest egress changed"});
}

TEST_F(caf_serialization, raw_json) {
  expect_round_trip(raw_json{R"({"a":[1,2]})"});
}

TEST_F(caf_serialization, egress_rule_and_policy) {
  expect_round_trip(rule("[2001:db8::/32]:443"));
  expect_round_trip(rule("10.0.0.0/8"));
  expect_round_trip(some_rules());
  expect_round_trip(egress_policy::deny_all());
}

TEST_F(caf_serialization, shapes_and_lists) {
  expect_round_trip(sample_shape());
  expect_round_trip(sample_shape_list());
  expect_round_trip(sample_list());
}

TEST_F(caf_serialization, sandbox_lifecycle) {
  expect_round_trip(sample_create());
  expect_round_trip(sample_created());
  expect_round_trip(sample_view());
  expect_round_trip(sample_deleted());
  expect_round_trip(sample_whoami());
  expect_round_trip(sample_egress_body());
  expect_round_trip(sample_capabilities());
}

TEST_F(caf_serialization, exec) {
  expect_round_trip(sample_exec_request());
  expect_round_trip(sample_exec_result());
  expect_round_trip(sample_stream_line(exec_stream_line::kind::stderr_chunk));
  expect_round_trip(sample_stream_line(exec_stream_line::kind::exit_code));
  expect_round_trip(sample_sandbox_result());
}

TEST_F(caf_serialization, jsend) {
  for (auto k : {jsend::kind::success, jsend::kind::fail, jsend::kind::error})
    expect_round_trip(sample_jsend(k));
}

TEST_F(caf_serialization, graph) {
  auto g = sample_graph();
  expect_round_trip(g.nodes.at(0));
  expect_round_trip(g.edges.at(1));
  expect_round_trip(g);
}

TEST_F(caf_serialization, run_types) {
  expect_round_trip(sample_result_data());
  expect_round_trip(sample_run_outputs());
  using fk = guest_frame::kind;
  for (auto k : {fk::step, fk::outputs, fk::fatal, fk::token, fk::message, fk::state})
    expect_round_trip(frame_of(k));
  using ek = run_event::kind;
  for (auto k : {ek::vertex_built, ek::complete, ek::error, ek::token, ek::message})
    expect_round_trip(event_of(k));
}

// A run keeps every event in its message for late joiners, so the event's size is memory
// per run: issue 36's payloads inline moved it from jemalloc's 448-byte class to 640.
TEST(run_extras, copies_share_them_an_edit_copies_first_and_plain_events_have_none) {
  auto plain = event_of(run_event::kind::vertex_started);
  EXPECT_TRUE(plain.extras.empty());
  EXPECT_TRUE(plain.data().empty());
  auto a = event_of(run_event::kind::token);
  auto b = a;
  EXPECT_EQ(&a.data(), &b.data()) << "a copy shares the extras";
  b.extras.edit().data = raw_json{R"({"chunk":"other"})"};
  EXPECT_EQ(a.data().text, R"({"chunk":"Hel","id":"msg-1"})") << "the original is untouched";
  EXPECT_EQ(b.data().text, R"({"chunk":"other"})");
  EXPECT_FALSE(a == b);
  auto& only = b.extras.edit();
  EXPECT_EQ(&only, &b.extras.edit()) << "an unshared edit writes in place";
  EXPECT_LE(sizeof(caf::detail::tuple_vals<run_event>), 448u)
      << "a run event's message is bigger than before issue 36";
}

TEST_F(caf_serialization, execution_types) {
  execution_spec spec;
  spec.name = "lf-exec-1";
  spec.create = sample_create();
  spec.uploads = {upload{"/work/main.py", "print(1)\n"}};
  spec.command = sample_exec_request();
  spec.timeout_seconds = 45;
  spec.stream = true;
  expect_round_trip(spec);
  execution_report report;
  report.guest_id = "sb-1";
  report.name = "lf-exec-1";
  report.result = sample_exec_result();
  report.outcome = ec::timeout;
  report.total_ms = 812;
  expect_round_trip(report);
  expect_round_trip(reaper_stats{1, 2, 3, 4, 5});
}

TEST_F(caf_serialization, truncated_buffer_is_an_error_not_a_crash) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys(), buf};
  auto x = sample_view();
  ASSERT_FALSE(sink(x));
  for (size_t cut = 0; cut < buf.size(); cut += 7) {
    std::vector<char> part(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(cut));
    sandbox_view y;
    caf::binary_deserializer source{sys(), part};
    EXPECT_TRUE(static_cast<bool>(source(y))) << "cut at " << cut;
  }
}

TEST_F(caf_serialization, errors_carry_code_and_message) {
  auto err = make_error(ec::timeout, "ran past 30 s");
  EXPECT_EQ(err.category(), error_category);
  EXPECT_EQ(to_failure(err), (failure{ec::timeout, "ran past 30 s"}));
  caf::error by_adl{ec::paused};
  EXPECT_EQ(to_failure(by_adl).code, ec::paused);
  auto rendered = sys().render(err);
  EXPECT_NE(rendered.find("timeout"), std::string::npos) << rendered;
  EXPECT_NE(rendered.find("ran past 30 s"), std::string::npos) << rendered;
}

TEST_F(caf_serialization, caf_own_errors_map_to_transient_or_unavailable) {
  auto timeout = to_failure(caf::make_error(caf::sec::request_timeout));
  EXPECT_EQ(timeout.code, ec::transient);
  EXPECT_FALSE(timeout.message.empty());
  auto down = to_failure(caf::make_error(caf::sec::request_receiver_down));
  EXPECT_EQ(down.code, ec::unavailable);
  EXPECT_FALSE(down.message.empty());
}

TEST_F(caf_serialization, errors_survive_serialization) {
  auto err = make_error(ec::policy_refused, "hostname egress refused");
  std::vector<char> buf;
  caf::binary_serializer sink{sys(), buf};
  ASSERT_FALSE(sink(err));
  caf::error back;
  caf::binary_deserializer source{sys(), buf};
  ASSERT_FALSE(source(back));
  EXPECT_EQ(to_failure(back), (failure{ec::policy_refused, "hostname egress refused"}));
}

TEST(error_names, round_trip_every_code) {
  for (int c = 1; c <= static_cast<int>(last_ec); ++c) {
    auto x = static_cast<ec>(c);
    EXPECT_EQ(ec_from_string(to_string(x)), x);
  }
  EXPECT_FALSE(ec_from_string("nope").has_value());
}

} // namespace
} // namespace guestflow
