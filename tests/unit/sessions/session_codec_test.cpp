#include "messages/base64.hpp"
#include "messages/session.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

TEST(SessionCodec, CommandEnvKeysMustBeShellNames) {
  auto ok = decode<session_command>(
      R"({"command":"echo $A_1","env":{"A_1":"x","_b":"y"},"cwd":"/tmp","timeout_seconds":5})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->env.at("A_1"), "x");
  EXPECT_EQ(ok->timeout_seconds, 5u);
  for (auto bad :
       {R"({"command":"x","env":{"1A":"x"}})", R"({"command":"x","env":{"A-B":"x"}})",
        R"({"command":"x","env":{"A B":"x"}})", R"({"command":"x","env":{"":"x"}})",
        R"({"command":"x","cwd":"rel"})", R"({"command":"x","timeout_seconds":0})"}) {
    auto r = decode<session_command>(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ec::bad_request);
  }
}

TEST(SessionCodec, RequestNeedsUserAndThread) {
  EXPECT_TRUE(decode<session_request>(R"({"user_id":"u","thread_id":"t"})"));
  EXPECT_FALSE(decode<session_request>(R"({"user_id":"","thread_id":"t"})"));
  EXPECT_FALSE(decode<session_request>(R"({"user_id":"u"})"));
  EXPECT_FALSE(decode<session_request>("{\"user_id\":\"u\",\"thread_id\":\"" +
                                       std::string(257, 'x') + "\"}"));
}

TEST(SessionCodec, OutputKeepsTheOrderOfBothStreams) {
  command_outcome x;
  x.chunks = {{false, "a"}, {true, "b"}, {false, "c"}};
  auto json = encode(x);
  EXPECT_NE(json.find(R"("stdout":"ac")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("stderr":"b")"), std::string::npos) << json;
  EXPECT_NE(json.find(R"("output":"abc")"), std::string::npos) << json;
  EXPECT_EQ(encode_command_lines(x),
            "{\"stdout\":\"a\"}\n{\"stderr\":\"b\"}\n{\"stdout\":\"c\"}\n"
            "{\"exit_code\":0,\"timed_out\":false}\n");
}

TEST(SessionCodec, Base64RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i)
    all.push_back(static_cast<char>(i));
  for (size_t n : {0, 1, 2, 3, 4, 255, 256}) {
    auto s = all.substr(0, n);
    auto back = base64_decode(base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_FALSE(base64_decode("abc"));
  EXPECT_FALSE(base64_decode("a=bc"));
  EXPECT_FALSE(base64_decode("ab\ncd=="));
}

} // namespace
} // namespace guestflow
