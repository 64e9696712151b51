// The JSend envelope of every control-plane body.

#include "messages/jsend.hpp"

#include <gtest/gtest.h>

namespace guestflow {
namespace {

TEST(jsend, success_keeps_data_canonical) {
  auto j = decode<jsend>(R"({"status":"success","data": {"id" : "sb-1", "n":[1, 2]}})");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->status, jsend::kind::success);
  EXPECT_EQ(j->data.text, R"({"id":"sb-1","n":[1,2]})");
  EXPECT_FALSE(j->message.has_value());
  EXPECT_FALSE(j->code.has_value());
}

TEST(jsend, fail_takes_the_message_from_data) {
  auto j = decode<jsend>(R"({"status":"fail","data":{"message":"name taken","name":"x"}})");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->status, jsend::kind::fail);
  EXPECT_EQ(j->message, std::string{"name taken"});
  auto no_message = decode<jsend>(R"({"status":"fail","data":{"name":"required"}})");
  ASSERT_TRUE(no_message);
  EXPECT_FALSE(no_message->message.has_value());
  auto non_string = decode<jsend>(R"({"status":"fail","data":{"message":["a"]}})");
  ASSERT_TRUE(non_string);
  EXPECT_FALSE(non_string->message.has_value());
}

TEST(jsend, error_carries_message_and_code) {
  auto j = decode<jsend>(R"({"status":"error","message":"sandbox is paused","code":409})");
  ASSERT_TRUE(j) << j.error().message;
  EXPECT_EQ(j->status, jsend::kind::error);
  EXPECT_EQ(j->message, std::string{"sandbox is paused"});
  EXPECT_EQ(j->code, int64_t{409});
  auto no_code = decode<jsend>(R"({"status":"error","message":"x"})");
  ASSERT_TRUE(no_code);
  EXPECT_FALSE(no_code->code.has_value());
}

TEST(jsend, helpers_decode_back) {
  auto s = decode<jsend>(jsend_success(R"([1,2])"));
  ASSERT_TRUE(s);
  EXPECT_EQ(s->data.text, "[1,2]");
  auto f = decode<jsend>(jsend_fail("shape is required"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status, jsend::kind::fail);
  EXPECT_EQ(f->message, std::string{"shape is required"});
  auto e = decode<jsend>(jsend_error("boom \"quoted\"", 500));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->message, std::string{"boom \"quoted\""});
  EXPECT_EQ(e->code, int64_t{500});
  auto empty = decode<jsend>(jsend_success(""));
  ASSERT_TRUE(empty) << "an empty payload becomes null, never invalid JSON";
  EXPECT_EQ(empty->data.text, "null");
}

} // namespace
} // namespace guestflow
