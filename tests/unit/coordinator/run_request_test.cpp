// The bridge's run body codec and the CAF side of the new message types.

#include "messages/type_ids.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <gtest/gtest.h>

namespace guestflow {
namespace {

const std::string flow =
    R"({"data":{"nodes":[{"id":"ChatInput-1","data":{"type":"ChatInput"}},)"
    R"({"id":"ChatOutput-2","data":{"type":"ChatOutput"}}],)"
    R"("edges":[{"source":"ChatInput-1","target":"ChatOutput-2"}]}})";

TEST(run_request_codec, decodes_the_full_body) {
  auto r =
      decode<run_request>(R"({"flow":)" + flow +
                          R"(,"inputs":"hi",)"
                          R"("runtime_options":{"session_id":"s"},"outputs":["ChatOutput-2"],)"
                          R"("stream":true,"timeout_seconds":30,"extra":1})");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->graph.nodes.size(), 2u);
  EXPECT_EQ(r->graph.edges.size(), 1u);
  EXPECT_EQ(r->inputs.text, R"("hi")");
  EXPECT_EQ(r->runtime_options.text, R"({"session_id":"s"})");
  EXPECT_EQ(r->outputs, std::vector<std::string>{"ChatOutput-2"});
  EXPECT_TRUE(r->stream);
  EXPECT_EQ(r->timeout_seconds, std::optional<uint32_t>{30});
  auto again = decode<run_request>(encode(*r));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(*again, *r);
}

TEST(run_request_codec, only_flow_is_required) {
  auto r = decode<run_request>(R"({"flow":)" + flow + "}");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->inputs.empty());
  EXPECT_TRUE(r->runtime_options.empty());
  EXPECT_TRUE(r->stream); // the bridge streams unless asked not to (bridge/API.md)
  EXPECT_FALSE(r->cancel_on_disconnect);
  EXPECT_FALSE(r->timeout_seconds);
}

TEST(run_request_codec, refusals_name_the_field) {
  struct bad_case {
    std::string body;
    const char* mentions;
  };
  for (
      auto& c : std::vector<bad_case>{
          {R"({})", "flow: required"},
          {R"({"flow":{"nodes":[]}})", "flow.edges: required"},
          {R"({"flow":{"nodes":[{"id":"a","data":{"type":"X"}}],"edges":[{"source":"a","target":"b"}]}})",
           "flow.edges[0].target: unknown node"},
          {R"({"flow":{"nodes":[{"id":"a","data":{"type":"X"}},{"id":"b","data":{"type":"X"}}],)"
           R"("edges":[{"source":"a","target":"b"},{"source":"b","target":"a"}]}})",
           "flow.edges: cycle: a -> b -> a"},
          {R"({"flow":)" + flow + R"(,"runtime_options":[]})",
           "runtime_options: expected object"},
          {R"({"flow":)" + flow + R"(,"outputs":"x"})", "outputs: expected array"},
          {R"({"flow":)" + flow + R"(,"timeout_seconds":0})",
           "timeout_seconds: 0 out of range"},
          {R"({"flow":)" + flow + R"(,"stream":"yes"})", "stream"},
          {R"({"flow":)", "document"},
      }) {
    auto r = decode<run_request>(c.body);
    ASSERT_FALSE(r) << c.body;
    EXPECT_EQ(r.error().code, ec::bad_request);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos)
        << c.body << " → " << r.error().message;
  }
}

template<class T>
void round_trip(caf::actor_system& sys, const T& x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto msg = caf::make_message(x);
  ASSERT_FALSE(sink(msg));
  caf::message back;
  caf::binary_deserializer source{sys, buf};
  ASSERT_FALSE(source(back));
  ASSERT_TRUE(back.match_elements<T>());
  EXPECT_TRUE(back.get_as<T>(0) == x);
}

TEST(run_request_codec, new_types_serialize_inside_caf_messages) {
  caf::actor_system_config cfg;
  register_types(cfg);
  caf::actor_system sys{cfg};
  auto r = decode<run_request>(R"({"flow":)" + flow + R"(,"inputs":"hi","timeout_seconds":5})");
  ASSERT_TRUE(r);
  round_trip(sys, *r);
  run_input in;
  in.input_value = "x";
  in.session = "s";
  in.components = {"a", "b"};
  round_trip(sys, in);
  round_trip(sys, coordinator_stats{1, 2, 3, 4, 5, 6});
}

} // namespace
} // namespace guestflow
