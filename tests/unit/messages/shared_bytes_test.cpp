#include "messages/shared_bytes.hpp"

#include <gtest/gtest.h>
#include <sstream>
#include <string>

namespace {

using guestflow::shared_bytes;

TEST(shared_bytes, a_joined_value_is_the_head_then_the_tail_and_shares_the_head) {
  shared_bytes head{std::string{"HEAD-"}};
  auto a = shared_bytes::joined(head, "tail a");
  auto b = shared_bytes::joined(head, "tail b");
  EXPECT_EQ(a.str(), "HEAD-tail a");
  EXPECT_EQ(a.size(), 11u);
  EXPECT_FALSE(a.empty());
  // Both share the head's bytes: no run copies them.
  EXPECT_EQ(a.pieces()[0].data(), head.pieces()[1].data());
  EXPECT_EQ(b.pieces()[0].data(), head.pieces()[1].data());
  EXPECT_EQ(b.pieces()[1], "tail b");
  std::ostringstream os;
  os << a;
  EXPECT_EQ(os.str(), "HEAD-tail a");
}

TEST(shared_bytes, the_head_outlives_its_first_holder) {
  shared_bytes joined;
  {
    shared_bytes head{std::string(1000, 'h')};
    joined = shared_bytes::joined(head, "t");
  }
  EXPECT_EQ(joined.str(), std::string(1000, 'h') + "t");
}

TEST(shared_bytes, equality_is_by_bytes_whatever_the_pieces) {
  auto joined = shared_bytes::joined(shared_bytes{"ab"}, "cd");
  EXPECT_EQ(joined, shared_bytes{"abcd"});
  EXPECT_EQ(shared_bytes{"abcd"}, joined);
  EXPECT_NE(joined, shared_bytes{"abce"});
  EXPECT_NE(joined, shared_bytes{"abc"});
  EXPECT_EQ(shared_bytes::joined(shared_bytes{}, "x"), shared_bytes{"x"});
  EXPECT_TRUE(shared_bytes::joined(shared_bytes{}, "").empty());
}

TEST(shared_bytes, a_joined_head_is_taken_whole) {
  auto inner = shared_bytes::joined(shared_bytes::of_static("static "), "middle ");
  auto outer = shared_bytes::joined(inner, "end");
  EXPECT_EQ(outer.str(), "static middle end");
  EXPECT_EQ(outer.size(), 17u);
}

} // namespace
